"""A preview in on-call's words: the lines the TUI's dialog, `argwatch mode preview` and the docs show as they are.

The wording is pinned (tests/unit/test_preview_text.py) so that a count of
calls cannot be read as a count of refusals: every window's first line says
how many calls there were, refused or not, and how many of them the modes now
refuse; every changed figure says which of those it is part of.
"""

from __future__ import annotations

from argwatch.server.modes.document import GLOBAL
from argwatch.server.modes.preview import UNKNOWN_TOOLS, Preview, WindowPreview
from argwatch.server.policy.check_ids import FAILURE_PREFIXES

CAUSE_WORDS = {
    "unverifiable": "unverifiable (source down)",
    "invented": "invented values",
    "other_scope": "another customer's values",
    "not_owned": "not owned",
    "out_of_range": "out of range",
    "repeat": "repeats",
    "not_found": "not found",
    "rule_failed": "rule failed",
    "unknown_tool": "naming a tool the policy does not know",
    "case": "wrong case",
    "separator": "wrong separator",
    "retired": "retired values",
}


def change_text(preview: Preview) -> str:
    """The change, in words: what it acts on, from what to what, for how long."""
    target = preview.target
    before = preview.before or "no override"
    if target.tool == GLOBAL and target.check.startswith(FAILURE_PREFIXES):
        subject = f"{target.check} failure override"
        what = {"open": "fails open while it cannot be read", "closed": "fails closed while it cannot be read"}
        told = "cleared (the policy's failure)" if preview.clearing else what.get(preview.after, preview.after)
    elif target.tool == GLOBAL:
        subject = "global override (every tool)"
        told = "cleared (each tool back to its own mode)" if preview.clearing else preview.after
    elif target.check:
        subject = f"{target.tool} {target.check}"
        told = preview.after + (
            " (override cleared: the tool's mode)" if preview.clearing else " (the tool's other checks keep theirs)"
        )
    else:
        subject = f"{target.tool}, the whole tool"
        told = preview.after + (" (override cleared: the policy's mode)" if preview.clearing else "")
    expiry = f", for {_duration(preview.expires_in)}" if preview.expires_in else ""
    return f"change: {subject}: {before} -> {told}{expiry}"


def lines(preview: Preview) -> list[str]:
    """The preview as on-call reads it, one sentence a line."""
    out = [change_text(preview)]
    whom = _whom(preview)
    if whom is None:
        out.append("it touches no tool of this policy: no call's decision would change")
    else:
        for window in preview.windows:
            out.extend(window_lines(window, whom))
            if window.newly_allowed and preview.repeats_unchecked:
                out.append(
                    "  some of those may still be refused as repeats: a refused call's repeat is never looked for"
                )
    if preview.protections:
        out.append("it switches off (security first):")
        out.extend(f"  {p.kind}{' (security)' if p.security else ''}: {p.text}" for p in preview.protections)
        if preview.protections_left_off:
            out.append(f"  ... and {preview.protections_left_off} more checks")
    elif whom is not None:
        out.append("it switches off no check that refuses now")
    return out


def window_lines(window: WindowPreview, whom: str) -> list[str]:
    """One window: the calls and what the modes now refuse of them, then what the change would decide apart."""
    span = _span(window)
    out = [
        f"{span}: {window.calls:,} calls {whom} on this replica, refused or not; "
        f"the modes in force now would have refused {window.refused_now:,} of them"
    ]
    if window.newly_allowed:
        out.append(
            f"  it would let through {window.newly_allowed:,} of those {window.refused_now:,} refused calls: "
            + _causes(window.newly_allowed_by_cause, window.newly_allowed)
        )
    if window.newly_refused:
        passing = window.calls - window.refused_now - window.not_previewed
        out.append(
            f"  it would refuse {window.newly_refused:,} of the {passing:,} calls let through now: "
            + _causes(window.newly_refused_by_cause, window.newly_refused)
        )
    if not window.newly_allowed and not window.newly_refused:
        out.append("  it would have decided none of them differently")
    if window.not_previewed:
        out.append(f"  {window.not_previewed:,} of the calls had problems in combinations not kept: not previewed")
    return out


def _causes(by_cause: dict[str, int], calls: int) -> str:
    """The causes, most calls first; said to overlap only where they do (they add up to more than `calls`)."""
    ordered = sorted(by_cause.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{count:,} {CAUSE_WORDS.get(cause, cause.replace('_', ' '))}" for cause, count in ordered)
    if sum(by_cause.values()) > calls:
        text += " (a call with two causes counts under each)"
    return text


def _whom(preview: Preview) -> str | None:
    if not preview.tools:
        return None
    if preview.target.tool == GLOBAL and not preview.target.check:
        known = [tool for tool in preview.tools if tool != UNKNOWN_TOOLS]
        unknown = " and to tools the policy does not know" if len(known) < len(preview.tools) else ""
        return f"to every tool ({len(known)}){unknown}"
    if len(preview.tools) == 1:
        return f"to {preview.tools[0]}"
    return f"to the {len(preview.tools)} tools it touches"


def _span(window: WindowPreview) -> str:
    asked = _duration(window.window_seconds)
    if window.covered_seconds + 1 < window.window_seconds:
        return f"last {asked} (only {_duration(max(window.covered_seconds, 1))} counted so far)"
    return f"last {asked}"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{int(seconds)} s"
