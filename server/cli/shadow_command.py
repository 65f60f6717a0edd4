"""`argwatch shadow set|clear|report|promote`: try a policy on live traffic, read what it would change, promote it.

`promote` first prints the shadow's report and the tools promotion changes,
then asks (a terminal), or takes `--yes`; it promotes only the shadow version
it showed. Exit codes are `argwatch mode`'s (mode_exchange.EXIT_CODES).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from argwatch.common.files import POLICY_BYTES, read_file
from argwatch.common.printable import printable
from argwatch.server.cli.mode_exchange import (
    APPLIED,
    EXIT_CODES,
    NOT_CONFIRMED,
    REFUSED,
    Failed,
    as_json,
    call,
    confirm,
    connection,
)
from argwatch.v1 import admin_pb2

if TYPE_CHECKING:  # the server loads the TUI package only when a command that needs it runs
    from argwatch.tui.admin_client import AdminClient

CommandFactory = Callable[..., argparse.ArgumentParser]
SHOWN_NAMES = 20  # tools listed per line of the diff; the rest counted


def add_command(command: CommandFactory) -> None:
    """Registers `shadow` and its subcommands through build_parser's `command` helper."""
    from argwatch.tui.run import add_admin_arguments  # the options only: no Textual

    shadow = command(
        "shadow",
        "try a policy on live traffic: it judges every call, never decides",
        "A shadow policy judges every live call after the live policy has decided it, and never decides\n"
        "one: the calls it would decide differently are counted per tool and kind, with examples.",
    )
    shadow.epilog = EXIT_CODES
    subcommands = shadow.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    chosen = command(
        "set",
        "make a policy file the shadow",
        "Send a policy file to the gateway as its shadow (replacing any shadow before it).\n\n"
        "  argwatch shadow set policy.next.yaml --reason 'CHG-7: codes.v2'",
        subcommands,
        "shadow set",
    )
    chosen.add_argument("file", metavar="FILE", help="the policy YAML file")
    _change_arguments(chosen, add_admin_arguments)
    chosen.set_defaults(run=run_set)

    cleared = command(
        "clear",
        "stop the shadow",
        "Stop the shadow policy: calls are judged by the live policy only, and its report is dropped.",
        subcommands,
        "shadow clear",
    )
    _change_arguments(cleared, add_admin_arguments)
    cleared.set_defaults(run=run_clear)

    reported = command(
        "report",
        "what the shadow would have decided differently",
        "Per tool and kind (would_refuse, would_allow, different_problems), the calls the shadow judged\n"
        "differently since it was set, with the newest examples; and what promoting it would change.",
        subcommands,
        "shadow report",
    )
    add_admin_arguments(reported)
    reported.add_argument("--json", action="store_true", help="print the Admin API's message as JSON")
    reported.epilog = EXIT_CODES
    reported.set_defaults(run=run_report)

    promoted = command(
        "promote",
        "serve the shadow as the live policy (shows the diff first)",
        "Show the shadow's report and the tools promoting it changes, ask, then serve the shadow's policy\n"
        "as the live one. No file is written: a later reload (SIGHUP, ReloadPolicy) serves the live\n"
        "policy's file again, so put the shadow's file in its place too.\n\n"
        "  argwatch shadow promote --reason 'CHG-7: a week without would_refuse'",
        subcommands,
        "shadow promote",
    )
    promoted.add_argument("--yes", "-y", action="store_true", help="do not ask: for scripts and chat bots")
    _change_arguments(promoted, add_admin_arguments)
    promoted.set_defaults(run=run_promote)


def _change_arguments(
    parser: argparse.ArgumentParser, add_admin_arguments: Callable[..., None], yes: bool = False
) -> None:
    parser.add_argument("--reason", required=True, help="why: a change ticket, what is tried (audited)")
    parser.add_argument("--json", action="store_true", help="print the gateway's answer as JSON")
    add_admin_arguments(parser, actor=True)
    parser.epilog = EXIT_CODES


def run_set(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if not args.reason.strip():
        return _failed("set", Failed(NOT_CONFIRMED, "--reason: a reason is required"))
    try:
        text = read_file(args.file, POLICY_BYTES)
    except OSError as error:
        return _failed("set", Failed(NOT_CONFIRMED, f"{args.file}: {error.strerror}"))
    reach = connection(args, environ)

    async def send(client: AdminClient) -> admin_pb2.SetShadowPolicyResponse:
        return await client.set_shadow(text, args.file, args.reason)

    try:
        done = call(reach, send)
    except Failed as stopped:
        return _failed("set", stopped)
    if args.json:
        print(json.dumps(as_json(done), indent=2))
    else:
        replaced = f" (replacing {done.previous_version})" if done.previous_version else ""
        print(f"shadow {done.shadow_version} set from {args.file}{replaced}: judging every call, deciding none")
        if done.unavailable_sets:
            print(f"  not loaded yet (its checks of them fail open or closed): {', '.join(done.unavailable_sets)}")
    return APPLIED


def run_clear(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if not args.reason.strip():
        return _failed("clear", Failed(NOT_CONFIRMED, "--reason: a reason is required"))
    reach = connection(args, environ)

    async def send(client: AdminClient) -> admin_pb2.ClearShadowPolicyResponse:
        return await client.clear_shadow(args.reason)

    try:
        done = call(reach, send)
    except Failed as stopped:
        return _failed("clear", stopped)
    if args.json:
        print(json.dumps(as_json(done), indent=2))
    else:
        print(f"shadow {done.shadow_version} cleared" if done.shadow_version else "no shadow was set")
    return APPLIED


def run_report(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    try:
        report = _report(args, environ)
    except Failed as stopped:
        return _failed("report", stopped)
    print(json.dumps(as_json(report), indent=2) if args.json else "\n".join(report_lines(report)))
    return APPLIED


def run_promote(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if not args.reason.strip():
        return _failed("promote", Failed(NOT_CONFIRMED, "--reason: a reason is required"))
    reach = connection(args, environ)
    try:
        report = _report(args, environ)
        if not report.loaded:
            raise Failed(REFUSED, "refused: no shadow policy is set")
        print("\n".join(report_lines(report)), file=sys.stderr)  # before the question, and with --yes too
        if not args.yes:
            confirm(f"Serve shadow {report.shadow_version} as the live policy? [y/N] ")

        async def send(client: AdminClient) -> admin_pb2.PromoteShadowResponse:
            return await client.promote_shadow(args.reason, report.shadow_version)

        done = call(reach, send)
    except Failed as stopped:
        return _failed("promote", stopped)
    if done.outcome.startswith("refused"):
        return _failed("promote", Failed(REFUSED, done.outcome))
    if args.json:
        print(json.dumps(as_json(done), indent=2))
    else:
        print(
            f"promoted: serving {done.policy_version} (was {done.previous_version}); no file was written, "
            "so a reload serves the policy file again"
        )
    return APPLIED


def report_lines(report: admin_pb2.GetShadowReportResponse) -> list[str]:
    """The report as on-call reads it: the shadow, its counts per tool and kind with examples, the diff. Each
    line escaped: an example's call id is the caller's, and is printed just before promote asks [y/N]."""
    if not report.loaded:
        return ["no shadow policy is set"]
    lines = [
        f"shadow {report.shadow_version} ({report.name}) since {report.since.ToDatetime():%Y-%m-%d %H:%M:%S} UTC: "
        f"{report.calls} calls judged, {report.busy} not judged (busy), {report.raised} raised"
    ]
    if report.unavailable_sets:
        lines.append(f"  sets unavailable to the shadow: {', '.join(report.unavailable_sets)}")
    if not report.differences:
        lines.append("  no call judged differently")
    for row in report.differences:
        lines.append(f"  {row.tool}  {row.kind}  {row.count}")
        for found in row.examples:
            live = ", ".join(f"{p.code}@{p.path or '(call)'}" for p in found.live_problems) or "no problems"
            shadow = ", ".join(f"{p.code}@{p.path or '(call)'}={p.value}" for p in found.shadow_problems)
            lines.append(
                f"    {found.call_id or '(no call id)'}: live {found.live_decision} ({live}); "
                f"shadow {found.shadow_decision} ({shadow or 'no problems'})"
            )
    if report.examples_left_off:
        lines.append(f"  ({report.examples_left_off} more examples not listed: the answer is kept under 3 MiB)")
    lines.append(f"promoting replaces live {report.live_version} with {report.shadow_version}:")
    for label, names in (
        ("tools added", report.tools_added),
        ("tools removed", report.tools_removed),
        ("tools changed", report.tools_changed),
    ):
        more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
        lines.append(f"  {label}: {', '.join(names[:SHOWN_NAMES]) or 'none'}{more}")
    if report.tools_left_off:
        lines.append(f"  ({report.tools_left_off} more tools not listed)")
    return [printable(line) for line in lines]


def _report(args: argparse.Namespace, environ: Mapping[str, str]) -> admin_pb2.GetShadowReportResponse:
    async def ask(client: AdminClient) -> admin_pb2.GetShadowReportResponse:
        return await client.shadow_report()

    return call(connection(args, environ), ask)


def _failed(name: str, stopped: Failed) -> int:
    print(f"argwatch shadow {name}: {stopped}", file=sys.stderr)
    return stopped.code
