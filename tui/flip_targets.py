"""What the flip dialog can act on for one tool: the whole tool, one of its checks, or a set, record kind or source."""

from __future__ import annotations

from dataclasses import dataclass

from argwatch.v1 import admin_pb2

WHOLE_TOOL = ""  # SetModeRequest.check for the whole tool


@dataclass(frozen=True, slots=True)
class FlipTarget:
    """One thing a flip can act on: `check` as SetModeRequest takes it; `failure` for a failure override (a
    source or set, for every tool: open, closed or clear) rather than a mode."""

    label: str
    check: str
    failure: bool
    now: str  # what is in force on it now, in words ("" for the whole tool: the dialog says it)


def flip_targets(tool: admin_pb2.ToolStatus, status: admin_pb2.GetStatusResponse) -> list[FlipTarget]:
    """The whole tool, each check by its override name, then what its checks read (CheckPolicy.failure_targets:
    value sets, record kinds and their sources), each once."""
    found = [FlipTarget("the whole tool", WHOLE_TOOL, False, "")]
    for check in tool.checks:
        if not check.name:
            continue
        said = [f"reads {check.argument}"] if check.argument else []
        if check.fails_closed:
            said.append("fails closed")
        if check.override_mode:
            said.append(f"override: {check.override_mode}")
        label = f"check {check.name}" + (f" ({', '.join(said)})" if said else "")
        now = (
            f"{check.override_mode} (override by {check.override_actor}: {check.override_reason})"
            if check.override_mode
            else "follows the tool's mode"
        )
        found.append(FlipTarget(label, check.name, False, now))
    overrides = {failure.target: failure for failure in status.failure_overrides}
    read = [target for check in tool.checks for target in check.failure_targets]
    for target in dict.fromkeys(read):  # in order, once each
        override = overrides.get(target)
        now = (
            f"fails {override.failure} (override by {override.actor}: {override.reason})"
            if override
            else "each check reading it fails as the policy says"
        )
        found.append(FlipTarget(f"failure of {target} (every tool reading it)", target, True, now))
    return found
