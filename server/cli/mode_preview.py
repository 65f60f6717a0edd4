"""`argwatch mode preview`, and the preview `mode set|clear|failure` show before they ask: the gateway's own lines.

The sentences are the server's (PreviewChangeResponse.lines), printed as they
are, so the TUI, the command line and the docs say one thing in one wording.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING

import grpc

from argwatch.server.cli import mode_view
from argwatch.server.cli.mode_exchange import APPLIED, EXIT_CODES, Failed, as_json, call, connection, failed
from argwatch.server.policy.check_ids import FAILURE_PREFIXES
from argwatch.v1 import admin_pb2, gateway_pb2

if TYPE_CHECKING:
    from argwatch.tui.admin_client import AdminClient, Connection

CHOICES = ("observe", "reject", "clear")
FAILURES = ("open", "closed", "clear")
# A gateway older than PreviewChange: the change itself is still served, so the preview only says it is missing.
NOT_SERVED = "no preview: this gateway does not serve PreviewChange (a release before it); the change is still possible"


def add_preview_command(
    command: Callable[..., argparse.ArgumentParser],
    subcommands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_admin_arguments: Callable[..., None],
    check_argument: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Registers `mode preview`: the targets `set`, `clear` and `failure` take, and nothing changed."""
    shown = command(
        "preview",
        "what a change would have done over the last 1 and 15 minutes; changes nothing",
        "What a change would have done, before it is made: over the last minute and the last 15 minutes,\n"
        "the calls it would have decided differently, by cause, and the protections it switches off.\n"
        "Changes nothing and audits nothing; a read-only token may ask.\n\n"
        "  argwatch mode preview refund_order observe\n"
        "  argwatch mode preview refund_order observe --check record:order\n"
        "  argwatch mode preview --global reject\n"
        "  argwatch mode preview source:orders_db --failure open",
        subcommands,
        "mode preview",
    )
    shown.add_argument("tool", nargs="?", default="", metavar="TOOL", help="the tool, or with --failure the TARGET")
    shown.add_argument("mode", nargs="?", default="", metavar="MODE", help="observe, reject or clear")
    shown.add_argument("--global", dest="every", action="store_true", help="the global override, over every tool")
    check_argument(shown)
    shown.add_argument(
        "--failure",
        choices=FAILURES,
        default="",
        help="a failure override of TARGET (source:<name>, set:<name> or record_kind:<kind>) instead of a mode",
    )
    shown.add_argument("--json", action="store_true", help="print the Admin API's answer as JSON")
    add_admin_arguments(shown, actor=True)  # unused by a preview; taken so a script passes one set of flags
    shown.epilog = EXIT_CODES
    shown.set_defaults(run=run_preview)


def request_of(args: argparse.Namespace) -> admin_pb2.SetModeRequest:
    """The change `mode preview`'s arguments name; ValueError (a usage error) when they name none."""
    if args.failure:
        target = args.tool
        if args.every or args.check or args.mode or not target.startswith(FAILURE_PREFIXES):
            raise ValueError("--failure takes one TARGET: source:<name>, set:<name> or record_kind:<kind>")
        return admin_pb2.SetModeRequest(check=target, failure="" if args.failure == "clear" else args.failure)
    tool, mode = args.tool, args.mode
    if args.every:
        if mode or args.check:
            raise ValueError("--global takes one MODE and no --check (mode preview --global MODE)")
        tool, mode = mode_view.GLOBAL, tool
    elif not tool:
        raise ValueError("name a TOOL and a MODE, --global and a MODE, or a TARGET and --failure")
    if mode not in CHOICES:
        raise ValueError(f"MODE {mode!r}: observe, reject or clear")
    wire = gateway_pb2.MODE_UNSPECIFIED if mode == "clear" else mode_view.MODES[mode]
    return admin_pb2.SetModeRequest(tool=tool, check=args.check, mode=wire)


def run_preview(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str] | None = None) -> int:
    """Prints the gateway's preview lines (or its answer as JSON with --json)."""
    out = out or sys.stdout  # looked up now: a test's capture replaces sys.stdout after import
    request = request_of(args)
    try:
        answer = call(connection(args, environ), lambda client: client.preview(request))
    except Failed as stopped:
        if stopped.status == grpc.StatusCode.UNIMPLEMENTED:
            stopped = Failed(stopped.code, NOT_SERVED.split(";")[0])
        return failed("preview", stopped)
    out.write(
        json.dumps(as_json(answer), indent=2) + "\n" if args.json else "".join(f"{line}\n" for line in answer.lines)
    )
    return APPLIED


def show(reach: Connection, request: admin_pb2.SetModeRequest) -> None:
    """Prints the preview of `request` on stderr, before the question; Failed when the gateway refuses it (the
    change SetMode would refuse) or cannot be reached. A gateway that does not serve it only says so."""

    async def asked(client: AdminClient) -> admin_pb2.PreviewChangeResponse:
        return await client.preview(request)

    try:
        answer = call(reach, asked)
    except Failed as stopped:
        if stopped.status != grpc.StatusCode.UNIMPLEMENTED:
            raise
        print(NOT_SERVED, file=sys.stderr)
        return
    print("\n".join(answer.lines), file=sys.stderr)
