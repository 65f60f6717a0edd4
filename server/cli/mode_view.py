"""What `argwatch mode` prints: the modes in force and where each comes from, and what a change will do.

Pure functions of the Admin API's messages (a status snapshot and the audit
trail), so the table and the plan shown before a change are tested without a
gateway. The status says each tool's mode, its source and expiry; who set an
override and why is only in the audit, so it is read from the newest entry
about that target.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from argwatch.common.durations import spoken
from argwatch.v1 import admin_pb2, gateway_pb2

GLOBAL = ""  # the tool of the global override, as SetModeRequest and ModeChange name it
UNKNOWN_TOOL = "_unknown"  # the status row of calls to tools the policy lacks: it has no mode to change
WORDS: dict[gateway_pb2.Mode, str] = {gateway_pb2.MODE_OBSERVE: "observe", gateway_pb2.MODE_REJECT: "reject"}
MODES = {word: mode for mode, word in WORDS.items()}


class UnknownTool(Exception):
    """The gateway's policy has no such tool (and no override of it to clear); the message lists its tools."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What a change will do, in lines for a person; `nothing` when there is nothing to change."""

    lines: tuple[str, ...]
    nothing: bool = False


def word(mode: gateway_pb2.Mode) -> str:
    return WORDS.get(mode, "none")


def setters(changes: Iterable[admin_pb2.ModeChange]) -> dict[str, admin_pb2.ModeChange]:
    """Per target (GLOBAL included), the change that made the override in force: the newest entry about it
    that was not refused, kept when it applied one (a clear or an expiry after it means there is none).
    `changes` newest first, as ListModeChanges answers."""
    latest: dict[str, admin_pb2.ModeChange] = {}
    for change in changes:
        if not change.outcome.startswith("refused") and change.tool not in latest:
            latest[change.tool] = change
    return {tool: change for tool, change in latest.items() if change.outcome == "applied"}


def tools_of(status: admin_pb2.GetStatusResponse) -> list[admin_pb2.ToolStatus]:
    return [tool for tool in status.tools if tool.tool != UNKNOWN_TOOL]


def render_list(
    status: admin_pb2.GetStatusResponse,
    changes: Sequence[admin_pb2.ModeChange],
    audit: int = 0,
) -> list[str]:
    """The modes in force as a table: the global override, then a row per tool, then (with `audit`) the
    newest entries of the audit trail."""
    now = status.taken_at
    by = setters(changes)
    store = status.mode_store or "memory"
    if not status.mode_store_connected and status.mode_store_error:
        store += f" (NOT CONNECTED: {status.mode_store_error}; changes are refused)"
    lines = [f"policy {status.policy_version}, modes kept in {store}"]
    if status.global_mode == gateway_pb2.MODE_UNSPECIFIED:
        lines.append("global override: none")
    else:
        lines.append(f"global override: {word(status.global_mode)}{_who(by.get(GLOBAL), now)}")
    rows = [("TOOL", "MODE", "SOURCE", "POLICY", "EXPIRES", "SET BY", "REASON")]
    for tool in tools_of(status):
        setter = by.get(GLOBAL if tool.mode_source == "global" else tool.tool) if tool.mode_source != "policy" else None
        rows.append(
            (
                tool.tool,
                word(tool.mode),
                tool.mode_source or "policy",
                word(tool.policy_mode),
                _expiry(tool.mode_expires_at if tool.HasField("mode_expires_at") else None, now)
                if tool.mode_source not in ("policy", "")
                else "-",
                setter.actor if setter else "-" if tool.mode_source in ("policy", "") else "?",
                setter.reason if setter else "-" if tool.mode_source in ("policy", "") else "?",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    for foreign in status.foreign_overrides:
        expires = _expiry(foreign.expires_at if foreign.HasField("expires_at") else None, now)
        lines.append(
            f"override of {foreign.tool} (a tool this replica's policy lacks): {word(foreign.mode)}, "
            f"by {foreign.actor} ({foreign.reason}), expires {expires}"
        )
    if audit:
        lines.append(f"audit, newest first ({min(audit, len(changes))} of the trail):")
        lines.extend(f"  {audit_line(change)}" for change in changes[:audit])
    return lines


def audit_line(change: admin_pb2.ModeChange) -> str:
    """One audit entry: when, who, what, old -> new, the outcome and why."""
    target = change.tool or "global"
    expires = f", expires {_at(change.expires_at)}" if change.HasField("expires_at") else ""
    return (
        f"{_at(change.at)}  {change.actor}  {target}: {change.old_mode or 'none'} -> {change.new_mode or 'none'}"
        f"  {change.outcome}{expires}  ({change.reason})"
    )


def plan(
    status: admin_pb2.GetStatusResponse,
    changes: Sequence[admin_pb2.ModeChange],
    tool: str,
    mode: str | None,
    expires_in: int,
) -> Plan:
    """What setting (`mode`) or clearing (None) the override of `tool` (GLOBAL: every tool) will do.
    UnknownTool when the policy has no such tool and there is no override of it to clear."""
    if tool == GLOBAL:
        return _global_plan(status, changes, mode, expires_in)
    now = status.taken_at
    row = next((row for row in tools_of(status) if row.tool == tool), None)
    if row is None:
        foreign = next((f for f in status.foreign_overrides if f.tool == tool), None)
        if mode is None and foreign is not None:
            return Plan(
                (
                    f"{tool}: clear its override ({word(foreign.mode)}, by {foreign.actor}: {foreign.reason}), "
                    "set through a replica on another policy; this replica's policy lacks the tool",
                )
            )
        known = ", ".join(row.tool for row in tools_of(status)) or "none"
        raise UnknownTool(f"the gateway's policy has no tool {tool!r} (its tools: {known})")
    before = f"{word(row.mode)} ({_source(row, setters(changes), now)})"
    forced = status.global_mode != gateway_pb2.MODE_UNSPECIFIED
    if mode is None:
        if row.mode_source in ("policy", ""):
            return Plan((f"{tool}: {before}: it has no override to clear",), nothing=True)
        if forced:
            return Plan(
                (
                    f"{tool}: {before}: clears its own override, if it has one; the global override "
                    f"({word(status.global_mode)}) stays in force",
                )
            )
        return Plan((f"{tool}: {before} -> {word(row.policy_mode)} (policy)",))
    after = f"{mode} (override{_in(expires_in)})"
    if forced:
        return Plan(
            (
                f"{tool}: {before}; its own override becomes {after}",
                f"the global override ({word(status.global_mode)}) stays in force: {tool} runs in "
                f"{word(status.global_mode)} until it is cleared",
            )
        )
    return Plan((f"{tool}: {before} -> {after}",))


def _global_plan(
    status: admin_pb2.GetStatusResponse, changes: Sequence[admin_pb2.ModeChange], mode: str | None, expires_in: int
) -> Plan:
    current = word(status.global_mode)
    tools = tools_of(status)
    if mode is None:
        if status.global_mode == gateway_pb2.MODE_UNSPECIFIED:
            return Plan(("global override: none: there is nothing to clear",), nothing=True)
        # The status shows the global mode on every row; a tool's own override is found in the audit.
        own = setters(changes)
        back = [
            f"{tool.tool} {own[tool.tool].new_mode or 'none'} (override)"
            if tool.tool in own
            else f"{tool.tool} {word(tool.policy_mode)} (policy)"
            for tool in tools
        ]
        return Plan(
            (
                f"global override: {current} -> none; each tool goes back to its own override, else its policy's mode:",
                "  " + (", ".join(back) or "no tools"),
            )
        )
    moved = [f"{tool.tool} {word(tool.mode)} -> {mode}" for tool in tools if word(tool.mode) != mode]
    return Plan(
        (
            f"global override: {current} -> {mode}{_in(expires_in, ', ')} (every tool, over its own override)",
            f"tools whose mode changes: {', '.join(moved) if moved else 'none'}",
        )
    )


def result_line(change: admin_pb2.ModeChange) -> str:
    """What the gateway did, as its audit entry says: "applied: refund_order reject -> observe by ana, ..."."""
    if change.tool and change.check:
        target = f"{change.tool} {change.check}"
    elif change.check:  # a failure override: a source, a set or a record kind, for every tool
        target = change.check
    else:
        target = change.tool or "global override"
    expires = f", expires {_at(change.expires_at)}" if change.HasField("expires_at") else ""
    return (
        f"{change.outcome}: {target} {change.old_mode or 'none'} -> {change.new_mode or 'none'} "
        f"by {change.actor}{expires} ({change.reason})"
    )


def _source(row: admin_pb2.ToolStatus, by: dict[str, admin_pb2.ModeChange], now: Timestamp) -> str:
    if row.mode_source in ("policy", ""):
        return "policy"
    setter = by.get(GLOBAL if row.mode_source == "global" else row.tool)
    named = "global override" if row.mode_source == "global" else "override"
    expires = row.mode_expires_at if row.HasField("mode_expires_at") else None
    return f"{named}{_who(setter, now, expires)}"


def _who(setter: admin_pb2.ModeChange | None, now: Timestamp, expires: Timestamp | None = None) -> str:
    """ ", by ana (INC-7), expires 12:00:00Z (in 14m)"; the expiry from the status row when it has one."""
    text = f", by {setter.actor} ({setter.reason})" if setter else ""
    if expires is None and setter is not None and setter.HasField("expires_at"):
        expires = setter.expires_at
    return text + (f", expires {_expiry(expires, now)}" if expires is not None else "")


def _expiry(expires: Timestamp | None, now: Timestamp) -> str:
    if expires is None:
        return "never"
    left = expires.ToNanoseconds() - now.ToNanoseconds()
    return f"{_at(expires)} (in {spoken(max(left, 0) / 1e9)})"


def _at(moment: Timestamp) -> str:
    return datetime.fromtimestamp(moment.ToNanoseconds() / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _in(expires_in: int, lead: str = ", ") -> str:
    return f"{lead}expires in {spoken(expires_in)}" if expires_in else f"{lead}no expiry"


def below_tools(status: admin_pb2.GetStatusResponse, every_check: bool = False) -> list[str]:
    """The overrides below a tool (one check's mode) and the failure overrides (a source, set or record kind
    failing open or closed); with `every_check`, each tool's checks by the names --check takes."""
    lines: list[str] = []
    for tool in tools_of(status):
        for check in tool.checks:
            if check.override_mode:
                expires = _expiry(
                    check.override_expires_at if check.HasField("override_expires_at") else None, status.taken_at
                )
                lines.append(
                    f"  {tool.tool} {check.name}: {check.override_mode} (override by {check.override_actor}: "
                    f"{check.override_reason}), expires {expires}"
                )
    if lines:
        lines.insert(0, "checks overridden:")
    if status.failure_overrides:
        lines.append("failure overrides:")
        lines += [
            f"  {failure.target}: fails {failure.failure} (by {failure.actor}: {failure.reason}), expires "
            + _expiry(failure.expires_at if failure.HasField("expires_at") else None, status.taken_at)
            for failure in status.failure_overrides
        ]
    if every_check:
        lines.append("checks (--check):")
        lines += [
            f"  {tool.tool}: {', '.join(c.name for c in tool.checks if c.name) or '-'}" for tool in tools_of(status)
        ]
    return lines
