"""`argwatch replay` and `argwatch sets export`: a corpus of recorded tool calls judged offline, and its sets."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from argwatch.common.durations import duration, parse_duration
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import Policy

if TYPE_CHECKING:
    from argwatch.server.replay.report import ReplayReport
    from argwatch.v1 import admin_pb2

CommandFactory = Callable[..., argparse.ArgumentParser]


def add_commands(command: CommandFactory) -> None:
    """Registers `replay` and `sets export` through build_parser's `command` helper."""
    from argwatch.common.tls_flags import add_tls_arguments

    replay = command(
        "replay",
        "judge a corpus of recorded tool calls offline",
        "Run recorded tool calls through the gateway's own verdict code, offline, with no gateway running:\n"
        "OpenAI Chat Completions and Responses transcripts or API responses, Anthropic Messages, MCP\n"
        "tools/call logs, or plain {tool, arguments} lines (JSON lines; .gz read as gzip). Prints, per tool\n"
        "and argument, the out-of-set rate raw and normalised, the shapes of the misses, problems by code\n"
        "and what reject mode would refuse. Malformed lines are counted, never fatal.",
    )
    replay.add_argument("files", nargs="+", metavar="FILE", help="JSON-lines files of recorded calls")
    replay.add_argument("--policy", required=True, help="the policy to judge them by")
    replay.add_argument(
        "--sets",
        default="",
        metavar="FILE",
        help="the value sets, from `argwatch sets export` (default: ask the policy's sources now)",
    )
    replay.add_argument(
        "--wait", type=duration, default=10.0, metavar="DURATION", help="how long to wait for the sets to load"
    )
    replay.add_argument("--json", action="store_true", help="print JSON instead of tables")
    live = replay.add_argument_group("comparing with a live gateway")
    live.add_argument(
        "--compare-to", default="", metavar="HOST:PORT", help="a gateway's Admin API: its rates beside the corpus's"
    )
    live.add_argument(
        "--window", default="", help="the live window to compare with: 1m, 15m or 1h (default: 1h; needs --compare-to)"
    )
    live.add_argument("--token-file", default="", metavar="FILE", help="a file holding the Admin bearer token")
    add_tls_arguments(live)
    replay.set_defaults(run=run_replay)

    sets = command("sets", "work with value sets", "Work with the policy's value sets.")
    sets_commands = sets.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    export = command(
        "export",
        "write the policy's value sets, as their owners serve them now, to one file",
        "Ask the policy's sources for every value set, as a gateway does at start-up, and write them to one\n"
        "file (the file source's format): `argwatch replay --sets FILE` then judges a corpus against exactly\n"
        "these sets, however the owners move on.",
        sets_commands,
        "sets export",
    )
    export.add_argument("--policy", required=True, help="the policy whose sets to export")
    export.add_argument("--out", required=True, metavar="FILE", help="where to write them")
    export.add_argument(
        "--wait", type=duration, default=10.0, metavar="DURATION", help="how long to wait for the sets to load"
    )
    export.add_argument(
        "--partial",
        action="store_true",
        help="write the sets that loaded even when some did not (default: write nothing, keep the file as it was)",
    )
    export.set_defaults(run=run_sets_export)


def run_replay(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.server.replay.corpus import ReadCounts, read_corpus
    from argwatch.server.replay.report import as_json, as_text, build_report
    from argwatch.server.replay.run import replay

    # Everything that can be wrong with the command line is said before a corpus is read.
    if args.window and not args.compare_to:
        raise ValueError("--window: it chooses the live window of --compare-to, which is not given")
    window = int(parse_duration(args.window or "1h")) if args.compare_to else 0
    from argwatch.server.replay.compare import WINDOWS

    if window and window not in WINDOWS:
        raise ValueError(f"--window {args.window}: the live gateway keeps windows of 1m, 15m and 1h")
    unreadable = [path for path in args.files if not os.path.isfile(path) or not os.access(path, os.R_OK)]
    if unreadable:
        print(f"argwatch replay: not a readable file: {', '.join(unreadable)}", file=sys.stderr)
        return 1
    policy = _policy(args.policy)
    if policy is None:
        return 1
    if args.compare_to and asyncio.run(_live_status(args, environ)) is None:
        return 1  # unreachable or refused: said before the corpus is replayed, not after
    read = ReadCounts()
    progress = _Progress() if sys.stderr.isatty() and not args.json else None
    try:
        calls = read_corpus(list(args.files), read, progress.update if progress else None)
        result = asyncio.run(replay(policy, calls, sets_file=args.sets, wait_seconds=args.wait))
    except OSError as error:
        print(f"argwatch replay: {error}", file=sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.done()
    report = build_report(policy, read, result)
    comparison = asyncio.run(_compare(args, environ, report, window, policy.version)) if args.compare_to else None
    if args.json:
        document = as_json(report)
        if comparison is not None:
            document["compared"] = comparison[1]
        print(json.dumps(document, indent=2))
    else:
        print(as_text(report))
        if comparison is not None:
            print("\n" + comparison[0])
    if result.sets_not_loaded:  # the report says which checks did not run; the exit code says it too
        why = "; ".join(
            f"{name} ({result.why_not_loaded[name]})" if result.why_not_loaded.get(name) else name
            for name in result.sets_not_loaded
        )
        print(f"argwatch replay: value sets not loaded: {why}", file=sys.stderr)
        return 1
    return 0 if comparison is not None or not args.compare_to else 1


async def _live_status(args: argparse.Namespace, environ: Mapping[str, str]) -> admin_pb2.GetStatusResponse | None:
    """The live gateway's status, or None after saying why it could not be had."""
    import grpc

    from argwatch.tui.admin_client import AdminClient
    from argwatch.tui.run import connection_from

    args.admin = args.compare_to
    client = AdminClient(connection_from(args, dict(environ)))
    try:
        return await client.status()
    except grpc.aio.AioRpcError as error:
        print(
            f"argwatch replay: --compare-to {args.compare_to}: {error.code().name}: {error.details()}", file=sys.stderr
        )
        return None
    finally:
        await client.close()


async def _compare(
    args: argparse.Namespace, environ: Mapping[str, str], report: ReplayReport, window: int, version: str
) -> tuple[str, dict[str, Any]] | None:
    from argwatch.server.replay.compare import compare, comparison_json, comparison_text

    status = await _live_status(args, environ)  # again: the window ends now, after the replay
    if status is None:
        return None
    rows = compare(report, status, window)
    text = comparison_text(rows, args.compare_to, window)
    if status.policy_version != version:  # two policies measure two things: said, not hidden
        text += f"\n  NOTE: the gateway serves policy {status.policy_version}; the replay used {version}"
    document = comparison_json(rows, args.compare_to, window)
    document["live_policy_version"], document["replay_policy_version"] = status.policy_version, version
    return text, document


def run_sets_export(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.server.replay.sets_export import export_sets

    policy = _policy(args.policy)
    if policy is None:
        return 1
    try:
        written, missing = asyncio.run(export_sets(policy, args.out, args.wait, partial=args.partial))
    except OSError as error:
        print(f"argwatch sets export: cannot write {args.out}: {error.strerror}", file=sys.stderr)
        return 1
    if missing:
        kept = (
            "wrote the others"
            if args.partial
            else f"wrote nothing; {args.out} is as it was (--partial writes the rest)"
        )
        print(f"argwatch sets export: not loaded within {args.wait:g}s: {', '.join(missing)}; {kept}", file=sys.stderr)
        if not args.partial:
            return 1
    for name, version in written.items():
        print(f"{name}: version {version}")
    print(f"wrote {len(written)} value set(s) to {args.out}")
    return 1 if missing else 0


def _policy(path: str) -> Policy | None:
    try:
        return load_policy(path)
    except PolicyError as error:
        print(error, file=sys.stderr)
        return None


class _Progress:
    """A one-line progress bar on stderr (only when it is a terminal): the share of bytes read."""

    def __init__(self) -> None:
        self._shown = -1

    def update(self, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        if percent != self._shown:
            self._shown = percent
            bar = "#" * (percent // 4)
            print(f"\rreplaying [{bar:<25}] {percent:3d}%", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._shown >= 0:
            print(file=sys.stderr)
