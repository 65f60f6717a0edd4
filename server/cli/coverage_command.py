"""`argwatch coverage`: what the policy checks of each tool argument and what it does not, offline or from a gateway.

Offline (`--policy`), it reads the policy file and, with `--samples`, a sampled
value log for the "few distinct values" suggestions; from a gateway (`--admin`)
it asks GetCoverage, which reads the policy in use and the gateway's offending
values. Both print the same Admin API message, as a table or as JSON, so the
two cannot drift apart.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import IO

import orjson
from google.protobuf import json_format

from argwatch.common.files import open_regular
from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.coverage import SampledValues, SampleKey, policy_coverage
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.telemetry.offenders import MAX_VALUES
from argwatch.v1 import admin_pb2

CommandFactory = Callable[..., argparse.ArgumentParser]
MAX_SAMPLE_KEYS = 10_000  # (tool, argument) pairs read from a log: its tool and argument names are model text


def add_command(command: CommandFactory) -> None:
    """Registers `coverage` through build_parser's `command` helper."""
    from argwatch.tui.run import add_admin_arguments  # the options only: no Textual

    coverage = command(
        "coverage",
        "what the policy checks of each argument, and what it does not",
        "List every argument of every tool (the schemas' properties, imported definitions' included, and\n"
        "every argument a binding, record or rule names) with what constrains it: enumerated (a value set,\n"
        "an enum), checked (a record, a rule, a pattern, a format the gateway checks, a range), typed only,\n"
        "or unconstrained; the covered share; and the unbound arguments that look enumerable, suggested for\n"
        "a binding.\n"
        "From a policy file (--policy), or from a running gateway's Admin API.",
    )
    offline = coverage.add_argument_group("offline")
    offline.add_argument("--policy", default="", metavar="FILE", help="read this policy file instead of a gateway")
    offline.add_argument(
        "--samples", default="", metavar="FILE", help="with --policy: a sampled-value log, for few-distinct suggestions"
    )
    add_admin_arguments(coverage)
    coverage.add_argument("--json", action="store_true", help="print the GetCoverage message as JSON")
    coverage.set_defaults(run=run)


def run(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str] | None = None) -> int:
    """Prints the coverage; 1, with the reason on stderr, when the policy, the log or the gateway fails."""
    out = out or sys.stdout  # looked up now: a test's capture replaces sys.stdout after import
    if args.samples and not args.policy:
        raise ValueError("--samples goes with --policy: a gateway reads its own offending values")
    found = _offline(args.policy, args.samples) if args.policy else asyncio.run(_from_gateway(args, environ))
    if found is None:
        return 1
    if args.json:
        shown = json_format.MessageToDict(
            found, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )
        out.write(json.dumps(shown, indent=2) + "\n")
    else:
        out.write("\n".join(render(found)) + "\n")
    return 0


def _offline(path: str, samples_path: str) -> admin_pb2.GetCoverageResponse | None:
    from argwatch.server.edge.admin_service import coverage_to_wire  # what the Admin API answers, offline

    try:
        policy = load_policy(path)
    except PolicyError as error:
        print(error, file=sys.stderr)
        return None
    samples: dict[SampleKey, SampledValues] = {}
    if samples_path:
        try:
            with io.TextIOWrapper(open_regular(samples_path), encoding="utf-8", errors="replace") as handle:
                samples = sampled_from_log(handle)
        except OSError as error:
            print(f"argwatch coverage: cannot read {samples_path}: {error.strerror}", file=sys.stderr)
            return None
    return coverage_to_wire(policy_coverage(policy, samples), samples_path)


async def _from_gateway(args: argparse.Namespace, environ: Mapping[str, str]) -> admin_pb2.GetCoverageResponse | None:
    import grpc

    from argwatch.tui.admin_client import AdminClient
    from argwatch.tui.run import connection_from

    connection = connection_from(args, dict(environ))
    client = AdminClient(connection)
    try:
        return await client.coverage()
    except grpc.aio.AioRpcError as error:
        print(f"argwatch coverage: {connection.target}: {error.code().name}: {error.details()}", file=sys.stderr)
        return None
    finally:
        await client.close()


def sampled_from_log(lines: Iterable[str]) -> dict[SampleKey, SampledValues]:
    """The values a sampled log holds per tool and argument (array indices read as `*`: lines/0/sku is
    lines/*/sku), each pair's distinct values bounded as the gateway's table is; lines that are not
    records are skipped."""
    counted: dict[SampleKey, Counter[str]] = {}
    overflowed: set[SampleKey] = set()
    for line in lines:
        try:
            record = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("value"), str):
            continue
        key = (str(record.get("tool", "")), pattern_of(str(record.get("argument", ""))))
        values = counted.get(key)
        if values is None:
            if len(counted) >= MAX_SAMPLE_KEYS:
                continue
            values = counted[key] = Counter()
        if record["value"] in values or len(values) < MAX_VALUES:
            values[record["value"]] += 1
        else:
            overflowed.add(key)
    return {
        key: SampledValues(
            total=values.total(),
            distinct=len(values),
            examples=tuple(value for value, _ in values.most_common()),
            complete=key not in overflowed,
        )
        for key, values in counted.items()
    }


def render(found: admin_pb2.GetCoverageResponse) -> list[str]:
    """The coverage as a table: a line per tool, a row per argument, then the suggested bindings."""
    counts = found.counts
    lines = [
        f"argument coverage of policy {found.policy_version}: {_total(counts)} arguments, {_covered(counts)}: "
        f"{_split(counts)}"
    ]
    width = max([len(row.argument) for tool in found.tools for row in tool.arguments] + [8])
    for tool in found.tools:
        named = _covered(tool.counts) if _total(tool.counts) else "no argument named"
        undeclared = (
            f"; arguments it does not name pass unchecked ({tool.undeclared_arguments})"
            if tool.undeclared_arguments
            else ""
        )
        lines.append(f"{tool.tool}: {named}{undeclared}")
        for row in tool.arguments:
            lines.append(f"  {row.argument:<{width}}  {row.coverage:<13}  {', '.join(row.constraints) or '-'}")
        if tool.arguments_left_off:
            lines.append(f"  ... and {tool.arguments_left_off} more arguments, counted above but not listed")
    more = f", and {found.suggestions_left_off} more" if found.suggestions_left_off else ""
    lines.append(f"suggested bindings: {len(found.suggestions) or 'none'}{more}")
    for suggestion in found.suggestions:
        lines.append(f"  {suggestion.tool}.{suggestion.argument} ({suggestion.binding}): {suggestion.reason}")
    lines.append(f"sampled values read: {found.samples or 'none (suggestions by name only)'}")
    return lines


def _total(counts: admin_pb2.CoverageCounts) -> int:
    return counts.enumerated + counts.checked + counts.typed + counts.unconstrained


def _covered(counts: admin_pb2.CoverageCounts) -> str:
    return f"{counts.enumerated + counts.checked} of {_total(counts)} covered ({100 * counts.covered_share:.1f}%)"


def _split(counts: admin_pb2.CoverageCounts) -> str:
    return (
        f"{counts.enumerated} enumerated, {counts.checked} checked, "
        f"{counts.typed} typed only, {counts.unconstrained} unconstrained"
    )
