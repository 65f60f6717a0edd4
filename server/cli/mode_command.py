"""`argwatch mode list|preview|set|clear|failure`: modes from a script or a chat bot, through the Admin API.

A change shows what it will do (mode and source now -> after, expiry), then
the gateway's preview of what it would have done (mode_preview), and asks on
a terminal; `--yes` answers for a script, and without a terminal or
`--yes` it stops rather than wait for an answer nobody will type. The exit
code says what happened, so a script can branch on it (EXIT_CODES).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING

from argwatch.common.durations import spoken
from argwatch.server.cli import mode_preview, mode_view
from argwatch.server.cli.mode_exchange import (
    APPLIED,
    EXIT_CODES,
    REFUSED,
    Failed,
    as_json,
    call,
    confirm,
    connection,
    failed,
)
from argwatch.server.policy.check_ids import FAILURE_PREFIXES
from argwatch.v1 import admin_pb2, gateway_pb2

if TYPE_CHECKING:  # the server loads the TUI package only when a command that needs it runs
    from argwatch.tui.admin_client import AdminClient, Connection

CommandFactory = Callable[..., argparse.ArgumentParser]
AUDIT_LIMIT = 1000  # the most ListModeChanges answers: who set each override in force is looked up in it


def add_command(command: CommandFactory) -> None:
    """Registers `mode` and its subcommands through build_parser's `command` helper."""
    from argwatch.tui.run import add_admin_arguments  # the options only: no Textual

    mode = command(
        "mode",
        "list and change tools' modes (for scripts and ChatOps)",
        "List every tool's mode in force and where it comes from, and set or clear an on-call override\n"
        "of one tool or of every tool, through the Admin API: what `m` and `g` do in the TUI.",
    )
    mode.epilog = EXIT_CODES
    subcommands = mode.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    listed = command(
        "list",
        "every tool's mode, and where it comes from",
        "Every tool's mode in force and where it comes from: the policy, an override (who set it, why,\n"
        "until when) or the global override. With --audit N, the newest N entries of the audit trail.",
        subcommands,
        "mode list",
    )
    add_admin_arguments(listed)
    listed.add_argument("--audit", type=_count, default=0, metavar="N", help="also the newest N audit entries")
    listed.add_argument("--json", action="store_true", help="print the Admin API's messages as JSON")
    listed.add_argument("--checks", action="store_true", help="also every check of every tool, by its --check name")
    listed.epilog = EXIT_CODES
    listed.set_defaults(run=run_list)

    changed = command(
        "set",
        "override one tool's mode, or every tool's (--global)",
        "Override one tool's mode (or every tool's, with --global) until cleared or until --expires.\n"
        "Shows what changes and asks first; --yes does not ask.\n\n"
        "  argwatch mode set refund_order observe --reason 'INC-7: false rejects' --expires 30m\n"
        "  argwatch mode set --global observe --reason 'INC-8' --yes",
        subcommands,
        "mode set",
    )
    changed.add_argument("tool", nargs="?", default="", metavar="TOOL", help="the tool (not with --global)")
    changed.add_argument("mode", metavar="MODE", help="observe or reject")
    _change_arguments(changed, add_admin_arguments)
    _check_argument(changed)
    changed.add_argument(
        "--expires",
        type=_expiry,
        default=0,
        metavar="DURATION",
        help="revert by itself after this long: 30m, 2h, at most 7d (default: never)",
    )
    changed.set_defaults(run=run_set)

    cleared = command(
        "clear",
        "clear one tool's override, or the global one (--global)",
        "Clear one tool's override (back to its policy's mode) or the global one (back to each tool's\n"
        "own override, else its policy's mode). Shows what changes and asks first; --yes does not ask.\n\n"
        "  argwatch mode clear refund_order --reason 'INC-7 over'",
        subcommands,
        "mode clear",
    )
    cleared.add_argument("tool", nargs="?", default="", metavar="TOOL", help="the tool (not with --global)")
    _change_arguments(cleared, add_admin_arguments)
    _check_argument(cleared)
    cleared.set_defaults(run=run_clear)

    failing = command(
        "failure",
        "make a source, set or record kind fail open (or closed), for every tool",
        "While a source is down, make every check reading it fail open: calls go through with the check\n"
        "listed as skipped and counted, and everything else is enforced. TARGET is source:<name>,\n"
        "set:<name> or record_kind:<kind>; FAILURE is open, closed, or clear. Asks first; --yes does not.\n\n"
        "  argwatch mode failure source:orders_db open --reason 'INC-9: orders db down' --expires 30m\n"
        "  argwatch mode failure source:orders_db clear --reason 'INC-9 over' --yes",
        subcommands,
        "mode failure",
    )
    failing.add_argument("target", metavar="TARGET", help="source:<name>, set:<name> or record_kind:<kind>")
    failing.add_argument("failure", metavar="FAILURE", help="open, closed, or clear")
    failing.add_argument("--reason", required=True, help="why: an incident number, what was seen (audited)")
    failing.add_argument("--yes", "-y", action="store_true", help="do not ask: for scripts and chat bots")
    failing.add_argument("--json", action="store_true", help="print the audit entry the gateway wrote as JSON")
    failing.add_argument(
        "--expires", type=_expiry, default=0, metavar="DURATION", help="revert by itself after this long: 30m, 2h"
    )
    add_admin_arguments(failing, actor=True)
    failing.epilog = EXIT_CODES
    failing.set_defaults(run=run_failure)
    mode_preview.add_preview_command(command, subcommands, add_admin_arguments, _check_argument)


def _check_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        default="",
        metavar="CHECK",
        help="one check of the tool instead of the whole tool: arg:<argument path>, record:<name>, rule:<name>, "
        "schema or repeat (mode list --checks lists them)",
    )


def _change_arguments(parser: argparse.ArgumentParser, add_admin_arguments: Callable[..., None]) -> None:
    parser.add_argument("--global", dest="every", action="store_true", help="the global override, over every tool")
    parser.add_argument("--reason", required=True, help="why: an incident number, what was seen (audited)")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask: for scripts and chat bots")
    parser.add_argument("--json", action="store_true", help="print the audit entry the gateway wrote as JSON")
    add_admin_arguments(parser, actor=True)
    parser.epilog = EXIT_CODES


def _count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of entries") from None
    if not 0 <= count <= AUDIT_LIMIT:
        raise argparse.ArgumentTypeError(f"{count}: from 0 to {AUDIT_LIMIT}")
    return count


def _expiry(text: str) -> int:
    from argwatch.tui.expiry import parse_expiry  # the TUI dialog's own rule: one grammar, one 7-day bound

    try:
        return parse_expiry(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---- running


def run_list(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str] | None = None) -> int:
    """Prints the modes in force; with --audit, the newest entries of the trail."""
    out = out or sys.stdout  # looked up now: a test's capture replaces sys.stdout after import
    reach = connection(args, environ)
    try:
        status, changes = call(reach, _status_and_audit)
    except Failed as stopped:
        return failed("list", stopped)
    if args.json:
        shown = {
            "status": as_json(_modes_only(status)),
            "overrides": {tool or "@global": as_json(change) for tool, change in mode_view.setters(changes).items()},
            "audit": [as_json(change) for change in changes[: args.audit]],
        }
        out.write(json.dumps(shown, indent=2) + "\n")
    else:
        lines = mode_view.render_list(status, changes, args.audit)
        out.write("\n".join([*lines, *mode_view.below_tools(status, every_check=args.checks)]) + "\n")
    return APPLIED


def run_set(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.mode not in mode_view.MODES:
        raise ValueError(f"MODE {args.mode!r}: observe or reject (mode set TOOL MODE, or mode set --global MODE)")
    return _change(args, environ, args.mode, args.expires)


def run_clear(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    return _change(args, environ, None, 0)


def run_failure(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """A failure override: no plan from the status beyond what it names; the gateway refuses what its policy lacks."""
    if not args.target.startswith(FAILURE_PREFIXES):
        raise ValueError(f"TARGET {args.target!r}: source:<name>, set:<name> or record_kind:<kind>")
    if args.failure not in ("open", "closed", "clear"):
        raise ValueError(f"FAILURE {args.failure!r}: open, closed, or clear")
    if not args.reason.strip():
        raise ValueError("--reason must say why (an incident number, what was seen): it goes to the audit trail")
    failure = "" if args.failure == "clear" else args.failure
    request = admin_pb2.SetModeRequest(
        check=args.target, failure=failure, reason=args.reason, expires_in_seconds=args.expires
    )
    shown = f"{args.target}: " + (
        "clear its failure override (back to each check's own failure)"
        if not failure
        else f"every check reading it fails {failure} while it cannot be read{_until(args.expires)}"
    )
    return _send(args, environ, request, shown, "failure")


def _until(expires_in: int) -> str:
    return f", for {spoken(expires_in)}" if expires_in else ""


def _send(
    args: argparse.Namespace, environ: Mapping[str, str], request: admin_pb2.SetModeRequest, shown: str, name: str
) -> int:
    """Shows `shown`, then _apply."""
    print(shown, file=sys.stderr)
    return _apply(args, connection(args, environ), request, name, f"{name}: make this change? [y/N] ")


def _apply(
    args: argparse.Namespace, reach: Connection, request: admin_pb2.SetModeRequest, name: str, question: str
) -> int:
    """Shows the gateway's preview of `request`, asks `question` (or takes --yes), sends `request` and prints
    the audit entry the gateway wrote."""
    try:
        mode_preview.show(reach, request)  # before the question, and with --yes too: a script's log keeps it
        if not args.yes:
            confirm(question)

        async def change(client: AdminClient) -> admin_pb2.SetModeResponse:
            return await client.change_override(request)

        answer = call(reach, change)
        made = answer.change
    except Failed as stopped:
        return failed(name, stopped)
    if made.outcome.startswith("refused"):  # the contract refuses by status code; an audit entry may say so too
        return failed(name, Failed(REFUSED, made.outcome))
    print(json.dumps(as_json(made), indent=2) if args.json else mode_view.result_line(made))
    if answer.durability_warning:  # the change is made: the warning goes to stderr, the exit code stays APPLIED
        print(f"{name}: warning: {answer.durability_warning}", file=sys.stderr)
    return APPLIED


def _change(args: argparse.Namespace, environ: Mapping[str, str], mode: str | None, expires_in: int) -> int:
    """Shows the plan, asks (or takes --yes), makes the change and prints the audit entry it wrote."""
    name = "set" if mode is not None else "clear"
    if not args.reason.strip():
        raise ValueError("--reason must say why (an incident number, what was seen): it goes to the audit trail")
    wire_mode = mode_view.MODES[mode] if mode is not None else gateway_pb2.MODE_UNSPECIFIED
    if args.check:
        if not args.tool or args.every:
            raise ValueError(f"--check names a check of a TOOL (mode {name} TOOL ... --check CHECK)")
        request = admin_pb2.SetModeRequest(
            tool=args.tool, check=args.check, mode=wire_mode, reason=args.reason, expires_in_seconds=expires_in
        )
        what = f"{mode}{_until(expires_in)}" if mode is not None else "clear its override (back to the tool's mode)"
        return _send(
            args, environ, request, f"{args.tool} {args.check}: {what}; the tool's other checks keep its mode", name
        )
    if bool(args.tool) == bool(args.every):
        raise ValueError(f"name a TOOL or give --global (mode {name} TOOL ..., mode {name} --global ...)")
    tool = mode_view.GLOBAL if args.every else args.tool
    reach = connection(args, environ)
    try:
        status, changes = call(reach, _status_and_audit)
        try:
            shown = mode_view.plan(status, changes, tool, mode, expires_in)
        except mode_view.UnknownTool as unknown:
            raise Failed(REFUSED, str(unknown)) from None
    except Failed as stopped:
        return failed(name, stopped)
    print("\n".join(shown.lines), file=sys.stderr)
    if shown.nothing:  # no audit entry to print: a ModeChange's outcome field alone, for --json readers
        print(json.dumps({"outcome": "nothing to change"}) if args.json else "nothing to change")
        return APPLIED
    request = admin_pb2.SetModeRequest(tool=tool, mode=wire_mode, reason=args.reason, expires_in_seconds=expires_in)
    return _apply(args, reach, request, name, f"{name} the override? [y/N] ")


async def _status_and_audit(
    client: AdminClient,
) -> tuple[admin_pb2.GetStatusResponse, list[admin_pb2.ModeChange]]:
    return await client.status(), await client.mode_changes(AUDIT_LIMIT)


def _modes_only(status: admin_pb2.GetStatusResponse) -> admin_pb2.GetStatusResponse:
    """The status without its figures: the modes, their sources and expiries, and the mode store."""
    kept = admin_pb2.GetStatusResponse(
        replica_id=status.replica_id,
        policy_version=status.policy_version,
        global_mode=status.global_mode,
        taken_at=status.taken_at,
        mode_store=status.mode_store,
        mode_store_connected=status.mode_store_connected,
        mode_store_error=status.mode_store_error,
        foreign_overrides=status.foreign_overrides,
        failure_overrides=status.failure_overrides,
    )
    for tool in mode_view.tools_of(status):
        row = kept.tools.add(
            tool=tool.tool,
            mode=tool.mode,
            mode_source=tool.mode_source,
            policy_mode=tool.policy_mode,
            side_effect=tool.side_effect,
            checks=tool.checks,
        )
        if tool.HasField("mode_expires_at"):
            row.mode_expires_at.CopyFrom(tool.mode_expires_at)
    return kept
