"""The commands other than serve: policy check, tools export, and the Admin API's tui, watch and report."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping

from argwatch.common.durations import parse_duration
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import Policy


def check_policy(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    path = args.file
    try:
        policy = load_policy(path)
    except PolicyError as error:
        print(error, file=sys.stderr)
        print(f"{path}: {len(error.issues)} error(s)", file=sys.stderr)
        return 1
    bound = sum(len(tool.arguments) for tool in policy.tools.values())
    print(
        f"{path}: ok: {len(policy.tools)} tools, {bound} bound arguments, "
        f"{len(policy.value_sets)} value sets, {len(policy.sources)} sources (version {policy.version})"
    )
    for warning in _unchecked_formats(policy):
        print(f"{path}: warning: {warning}", file=sys.stderr)
    return 0


def _unchecked_formats(policy: Policy) -> list[str]:
    """Asserted formats no checker knows: they let any text through (a misspelling, or a format such as iri)."""
    from argwatch.server.policy.coverage import policy_coverage

    warnings = []
    for tool in policy_coverage(policy).tools:
        for row in tool.arguments:
            for constraint in row.constraints:
                if constraint.startswith("format:") and "no checker" in constraint:
                    name = constraint.removeprefix("format:").split(" (", 1)[0]
                    warnings.append(
                        f"tools.{tool.tool}: {row.argument}: format {name!r} has no checker here, so any text passes "
                        "(a misspelling? else add a pattern)"
                    )
    return warnings


def export_tools(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.client import GatewayError, tool_definitions
    from argwatch.common.tls_flags import security_from

    security = security_from(args)
    try:
        exported = tool_definitions(args.gateway, args.format, args.tool, security=security)
    except GatewayError as error:
        print(f"argwatch tools export: {args.gateway}: {error.code}: {error.details}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"argwatch tools export: {error.filename}: {error.strerror}", file=sys.stderr)
        return 1
    print(json.dumps(exported, indent=2))
    return 0


def tui(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.tui.run import connection_from, run_tui, tui_installed

    connection = connection_from(args, dict(environ))
    if sys.stdout.isatty() or not tui_installed():  # without the extra: say how to install it, piped or not
        return run_tui(connection, args.interval, args.readonly)
    # Piped or redirected (a log, `| tee`, a CI job): a full-screen app would draw its escape codes into
    # the file. The one-line status says the same in lines a file can hold.
    from argwatch.tui.status_line import watch_status

    print("argwatch tui: stdout is not a terminal; printing the one-line status instead", file=sys.stderr)
    return asyncio.run(watch_status(connection, args.interval, 0))


def watch(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.tui.run import connection_from
    from argwatch.tui.status_line import watch_status  # the TUI package talks only to the Admin API

    return asyncio.run(watch_status(connection_from(args, dict(environ)), args.interval, args.count))


def report(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.tui.report import report_from_admin, report_from_samples
    from argwatch.tui.run import connection_from

    if args.samples:
        try:
            return report_from_samples(args.samples)
        except OSError as error:
            print(f"argwatch report: cannot read {args.samples}: {error.strerror}", file=sys.stderr)
            return 1
    try:
        window = 0 if args.window in ("0", "") else int(parse_duration(args.window))
    except ValueError as error:
        raise ValueError(f"--window: {error}") from None
    return asyncio.run(report_from_admin(connection_from(args, dict(environ)), window))


def health(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """grpc.health.v1 Check against the Gateway listener: 0 when SERVING (the container's health check)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from argwatch.common.channels import blocking_channel
    from argwatch.common.tls_flags import security_from

    try:
        with blocking_channel(args.gateway, security_from(args)) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
    except grpc.RpcError as error:
        code, details = error.code(), error.details()
        print(f"argwatch health: {args.gateway}: {code.name}: {details}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(f"{args.gateway}: {status}")
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1
