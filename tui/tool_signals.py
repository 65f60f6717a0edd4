"""What a tool's status says now, beyond its counts: refusing now, a retry storm, checks that fail closed
while observed, and the overrides below the tool (a check's mode, a source's failure)."""

from __future__ import annotations

from collections.abc import Sequence

from argwatch.tui.windows import window_of
from argwatch.v1 import admin_pb2, gateway_pb2

# A retry storm: the last minute's calls/s at least STORM_RATIO times the 14 minutes before it, over at least
# STORM_MIN_CALLS calls (a quiet tool's 3 calls after 1 are not a storm), while repeats or repairs started
# come faster than before: agents calling again, not more agents.
STORM_RATIO = 1.5
STORM_MIN_CALLS = 60
STORM_MIN_RETRIES = 5
BASELINE_MIN_SECONDS = 60.0  # less history than this before the last minute: no baseline to compare with


RECENT_MIN_CALLS = 5  # fewer calls than this in the last 15 s: too few to say a share, the minute says it


def refusing_share(tool: admin_pb2.ToolStatus) -> float:
    """The share of the tool's calls refused now: over the last 15 s (ToolStatus.recent), else (a quiet tool,
    or a gateway without it) the last minute; 0 while nothing can refuse (the tool observed, and no check of it
    in reject), so a flip to observe reads at once."""
    if not can_refuse(tool):
        return 0.0
    recent = tool.recent
    return (recent if recent.calls >= RECENT_MIN_CALLS else window_of(tool, 60)).rejected_rate


def can_refuse(tool: admin_pb2.ToolStatus) -> bool:
    return tool.mode == gateway_pb2.MODE_REJECT or any(check.override_mode == "reject" for check in tool.checks)


def observed(tool: admin_pb2.ToolStatus, check: admin_pb2.CheckPolicy) -> bool:
    """Whether the check's problems let its calls through now: its override, else the tool's mode."""
    if check.override_mode:
        return check.override_mode == "observe"
    return tool.mode == gateway_pb2.MODE_OBSERVE


def closed_and_down(tool: admin_pb2.ToolStatus, argument: str | None) -> list[admin_pb2.CheckPolicy]:
    """The row's checks that fail closed and cannot run now (`argument` None: the tool's)."""
    return [
        check
        for check in tool.checks
        if (argument is None or check.argument == argument) and check.fails_closed and not check.available_now
    ]


def storm_ratio(tool: admin_pb2.ToolStatus) -> float:
    """How many times the 14 minutes before it the last minute's calls/s is, when that is a retry storm
    (see STORM_RATIO); 0 otherwise."""
    minute, quarter = window_of(tool, 60), window_of(tool, 900)
    before_seconds = quarter.covered_seconds - minute.covered_seconds
    before_calls = quarter.calls - minute.calls
    if minute.calls < STORM_MIN_CALLS or before_seconds < BASELINE_MIN_SECONDS or before_calls <= 0:
        return 0.0
    ratio = (minute.calls / minute.covered_seconds) / (before_calls / before_seconds)
    retries_now = minute.repeats + minute.repair_started
    retries_before = quarter.repeats + quarter.repair_started - retries_now
    rising = retries_now >= STORM_MIN_RETRIES and retries_now / minute.covered_seconds > retries_before / before_seconds
    return ratio if ratio >= STORM_RATIO and rising else 0.0


def failure_targets_of(
    tool: admin_pb2.ToolStatus,
    failures: Sequence[admin_pb2.FailureOverride],
    sources: Sequence[admin_pb2.SourceStatus],
) -> list[admin_pb2.FailureOverride]:
    """The failure overrides that touch a check of `tool`: its source's, its set's, its record kind's."""
    sets = {check.check.removeprefix("set:") for check in tool.checks if check.check.startswith("set:")}
    touched = []
    for failure in failures:
        kind, _, name = failure.target.partition(":")
        if kind == "set":
            hit = name in sets
        elif kind == "source":
            hit = any(s.name == name and tool.tool in s.tools for s in sources)
        else:  # record_kind: the tools of the sources serving that kind
            hit = any(name in s.record_kinds and tool.tool in s.tools for s in sources)
        if hit:
            touched.append(failure)
    return touched


def overrides_text(tool: admin_pb2.ToolStatus, failures: Sequence[admin_pb2.FailureOverride]) -> str:
    """The overrides below the tool, compactly: "1 check observe", "orders fails open"; "" when none."""
    parts = []
    for mode in ("observe", "reject"):
        count = sum(1 for check in tool.checks if check.override_mode == mode)
        if count:
            parts.append(f"{count} check{'s' if count > 1 else ''} {mode}")
    parts.extend(f"{f.target.partition(':')[2]} fails {f.failure}" for f in failures)
    return ", ".join(parts)


def override_count(tool: admin_pb2.ToolStatus, failures: Sequence[admin_pb2.FailureOverride]) -> int:
    return sum(1 for check in tool.checks if check.override_mode) + len(failures)
