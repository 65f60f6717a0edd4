"""The `argwatch` command: serve, tui, policy check, watch (a live one-line status), report and tools export."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from argwatch.common.durations import parse_duration
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.process.settings import Settings, add_serve_arguments, settings_from
from argwatch.server.process.workers import check_workers, run_workers

log = logging.getLogger("argwatch.cli")


def main(argv: Sequence[str] | None = None) -> int:
    # The TUI's options and client only (no Textual, which loads when `argwatch tui` runs).
    from argwatch.tui.run import add_tui_arguments, connection_from, run_tui

    parser = argparse.ArgumentParser(prog="argwatch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway")
    add_serve_arguments(serve)

    policy = commands.add_parser("policy", help="work with policy files")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    check = policy_commands.add_parser("check", help="validate a policy file offline")
    check.add_argument("file")

    watch = commands.add_parser("watch", help="print a live one-line status from a gateway's Admin API")
    watch.add_argument("--admin", default="127.0.0.1:50052", help="the Admin API's HOST:PORT")
    watch.add_argument("--interval", type=float, default=1.0, help="seconds between lines")
    watch.add_argument("--count", type=int, default=0, help="stop after this many lines (0: never)")

    tui = commands.add_parser("tui", help="the on-call TUI: a gateway's live figures, and mode changes")
    add_tui_arguments(tui)

    report = commands.add_parser("report", help="the mismatch-shape report (from the Admin API or a sampled log)")
    source = report.add_mutually_exclusive_group(required=True)
    source.add_argument("--admin", help="a gateway's Admin API HOST:PORT")
    source.add_argument("--samples", help="a sampled-value log file (JSON lines)")
    report.add_argument("--window", default="0", help="with --admin: 15m, 1h (0: since start)")

    tools = commands.add_parser("tools", help="the policy's tools as model clients describe them")
    tools_commands = tools.add_subparsers(dest="tools_command", required=True)
    export = tools_commands.add_parser(
        "export", help="print the tool definitions, enums filled from today's value sets (from a running gateway)"
    )
    export.add_argument("--target", default="127.0.0.1:50051", help="the gateway's HOST:PORT")
    export.add_argument("--format", choices=["mcp", "openai", "anthropic"], default="mcp")
    export.add_argument("--tool", action="append", default=[], help="only this tool (repeatable); all by default")

    args = parser.parse_args(argv)
    if args.command == "tools":
        return _export_tools(args.target, args.format, args.tool)
    if args.command == "report":
        return _report(parser, args)
    if args.command == "policy":
        return _check_policy(args.file)
    if args.command == "tui":
        try:
            connection = connection_from(args)
        except ValueError as error:
            parser.error(str(error))
        return run_tui(connection, args.interval, args.readonly)
    if args.command == "watch":
        from argwatch.tui.status_line import watch_status  # the TUI package talks only to the Admin API

        return asyncio.run(watch_status(args.admin, args.interval, args.count))
    try:
        settings = settings_from(args, os.environ)
        check_workers(settings)
    except ValueError as error:
        parser.error(str(error))
    if settings.workers > 1:
        if _check_policy_quietly(settings.policy):
            return 2
        logging.basicConfig(
            level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return run_workers(list(sys.argv[1:] if argv is None else argv), settings)
    return _serve(settings)


def _export_tools(target: str, shape: str, tools: list[str]) -> int:
    import grpc

    from argwatch.client.definitions import tool_definitions

    try:
        exported = tool_definitions(target, shape, tools)
    except grpc.RpcError as error:
        print(f"argwatch tools export: {target}: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    print(json.dumps(exported, indent=2))
    return 0


def _check_policy_quietly(path: str) -> int:
    """Before starting workers: an invalid policy is reported once, not by every worker."""
    try:
        load_policy(path)
    except PolicyError as error:
        print(error, file=sys.stderr)
        print("argwatch: refusing to start with an invalid policy", file=sys.stderr)
        return 2
    return 0


def _report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from argwatch.tui.report import report_from_admin, report_from_samples

    if args.samples:
        try:
            return report_from_samples(args.samples)
        except OSError as error:
            print(f"argwatch report: cannot read {args.samples}: {error.strerror}", file=sys.stderr)
            return 1
    try:
        window = 0 if args.window in ("0", "") else int(parse_duration(args.window))
    except ValueError as error:
        parser.error(f"--window: {error}")
    return asyncio.run(report_from_admin(args.admin, window))


def _check_policy(path: str) -> int:
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
    return 0


def _serve(settings: Settings) -> int:
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        policy = load_policy(settings.policy)
    except PolicyError as error:
        print(error, file=sys.stderr)
        print("argwatch: refusing to start with an invalid policy", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, policy))


async def _run(settings: Settings, policy: object) -> int:
    from argwatch.server.modes.store import ModeRefused
    from argwatch.server.policy.model import Policy
    from argwatch.server.process.app import build_gateway
    from argwatch.server.telemetry.samples import attach_sample_sink

    assert isinstance(policy, Policy)
    detach = attach_sample_sink(settings.sample_log)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        gateway = await build_gateway(settings, policy=policy)
    except (OSError, ValueError, ModeRefused) as error:
        log.error("cannot start: %s", error)
        detach()
        return 2
    # Everything built so far lives as long as the process: exempt it from the
    # collector's scans, which otherwise grow with every long-lived object.
    gc.freeze()
    await stopping.wait()
    log.info("signal received: draining (up to %.1fs)", settings.grace_seconds)
    await gateway.stop()
    detach()
    return 0


if __name__ == "__main__":
    sys.exit(main())
