"""What the TUI's main table shows, computed from one status snapshot: plain rows, no Textual.

Health is spelled out in words (FAIL-OPEN, STALE, SRC-DOWN, NO-SET) in its own
column and marked with "!" in the first, so it reads on a terminal without
colour; colour only repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from argwatch.tui.layout import compact_count
from argwatch.tui.source_lines import down_sources
from argwatch.tui.tool_signals import (
    closed_and_down,
    failure_targets_of,
    observed,
    override_count,
    overrides_text,
    refusing_share,
    storm_ratio,
)
from argwatch.tui.windows import WINDOW_NAMES, WINDOWS, window_of
from argwatch.v1 import admin_pb2, gateway_pb2

__all__ = ["WINDOWS", "WINDOW_NAMES", "refusing_share", "window_of"]  # here for the readers that had them here
SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 20  # the hour in 3-minute steps
NO_ARGUMENT = "-"  # the row of a tool the policy checks no argument of
MODE_NAMES = {gateway_pb2.MODE_OBSERVE: "observe", gateway_pb2.MODE_REJECT: "reject"}
# Why a set is not fresh, as a health flag. Unreachable and not-loaded have their own
# flags (SRC-DOWN, NO-SET); the others were shown as a bare STALE, which hid the cause.
CAUSE_FLAGS = {
    admin_pb2.STALE_CAUSE_UPDATE_REFUSED: "REFUSED",
    admin_pb2.STALE_CAUSE_TOO_LARGE: "TOO-LARGE",
    admin_pb2.STALE_CAUSE_NOT_SERVED: "NOT-SERVED",
    admin_pb2.STALE_CAUSE_NOT_CONFIRMED: "UNCONFIRMED",
    admin_pb2.STALE_CAUSE_SAVED_COPY: "SAVED-COPY",
}
CAUSE_WORDS = {
    admin_pb2.STALE_CAUSE_NOT_LOADED: "not loaded",
    admin_pb2.STALE_CAUSE_SOURCE_UNREACHABLE: "source down",
    admin_pb2.STALE_CAUSE_UPDATE_REFUSED: "update refused",
    admin_pb2.STALE_CAUSE_TOO_LARGE: "too large",
    admin_pb2.STALE_CAUSE_NOT_SERVED: "not served",
    admin_pb2.STALE_CAUSE_NOT_CONFIRMED: "not confirmed",
    admin_pb2.STALE_CAUSE_SAVED_COPY: "saved copy",
}

# (header, key, width); 0: as wide as the longest name shown (tool and argument names).
COLUMNS = (
    ("!", "flag", 1),
    ("TOOL", "tool", 0),
    ("ARGUMENT", "argument", 0),
    ("MODE", "mode", 18),
    ("CALLS/S", "rate", 7),
    ("OOS%", "oos", 5),
    ("NORM%", "norm", 5),
    ("PROBLEMS", "problems", 8),
    ("OOS% LAST HOUR", "spark", SPARK_WIDTH),
    ("REPAIR succeeded/abandoned/open", "repair", 31),
    ("REPEATS", "repeats", 7),
    ("FAIL-OPEN", "open", 9),
    ("SET AGE", "age", 7),
    ("HEALTH", "health", 40),
)
WIDTHS = {key: width for _label, key, width in COLUMNS}
COUNT_IN_FLAG = 4  # a count inside a health flag: "FAIL-OPEN 12.3k" at most
CLOSED_OBSERVED = "CLOSED·OBSERVED"  # a fail-closed check that cannot run, on an observed tool or check


class Row(NamedTuple):
    """One table row: a tool and one of its arguments, each cell as text."""

    key: str
    tool: str
    argument: str
    value_set: str
    unhealthy: bool
    cells: tuple[str, ...]  # in COLUMNS order; HEALTH holds every flag (see flags)
    flags: tuple[str, ...] = ()  # HEALTH's flags, each whole: a narrow column shows those that fit
    refusing: float = 0.0  # the share of the tool's calls refused now (the last minute)


def row_key(tool: str, argument: str) -> str:
    return f"{tool}\x1f{argument}"


SHORT_SOURCES = {"override": "ovr", "global": "glb"}


def mode_text(tool: admin_pb2.ToolStatus, short: bool = False) -> str:
    """ "reject", "observe", with where it comes from when it is not the policy's: "observe (override)"
    ("observe (ovr)" on a narrow screen)."""
    name = MODE_NAMES.get(tool.mode, "-")
    if tool.mode_source in ("override", "global"):
        source = SHORT_SOURCES[tool.mode_source] if short else tool.mode_source
        return f"{name} ({source})"
    return name


REFUSING_MOST = 0.5  # a tool refusing at least this share of its calls now: its MODE cell is drawn in alarm


def refusing_text(share: float) -> str:
    """ "refusing 37%", never rounded up to "100%" (which must mean every call) nor down to "0%"."""
    if share <= 0:
        return ""
    if share >= 1:
        return "refusing 100%"
    shown = 100 * share
    return "refusing <1%" if shown < 1 else f"refusing {min(round(shown), 99)}%"


def mode_cell(
    tool: admin_pb2.ToolStatus, short: bool = False, failures: Sequence[admin_pb2.FailureOverride] = ()
) -> str:
    """MODE as the table shows it: the mode, how much it refuses now, and the overrides below the tool ("reject
    · refusing 100% · 1 check observe"; `failures`: the failure overrides touching it). Written short, a tool
    that refuses reads "refusing 100%" alone (only reject mode refuses, so it says the mode too), and one with
    overrides below it "reject +1 ovr", or "refusing 24%+" when it also refuses (the detail lists them)."""
    refusing = refusing_text(refusing_share(tool))
    if short:
        below = override_count(tool, failures)
        if refusing:
            return refusing + ("+" if below else "")
        if not below:
            return mode_text(tool, short=True)
        return f"{MODE_NAMES.get(tool.mode, '-')} +{below} ovr"
    return " · ".join(part for part in (mode_text(tool), refusing, overrides_text(tool, failures)) if part)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def per_second(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 1 or value == 0 else f"{value:.2f}"


def age_text(seconds: float) -> str:
    if seconds < 0:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def sparkline(parts: Sequence[int], wholes: Sequence[int], width: int = SPARK_WIDTH) -> str:
    """The out-of-set rate per step over the hour: one character per step, blank where nothing was checked.

    Scaled to the highest step so a rise shows, whatever the level; the
    percentages in the table give the level."""
    step = max(len(parts) // width, 1)
    rates: list[float | None] = []
    for start in range(0, step * width, step):
        whole = sum(wholes[start : start + step])
        rates.append(sum(parts[start : start + step]) / whole if whole else None)
    top = max((rate for rate in rates if rate is not None), default=0.0)
    line = []
    for rate in rates:
        if rate is None:
            line.append(" ")
        elif top == 0:
            line.append(SPARK[0])
        else:
            line.append(SPARK[min(int(rate / top * (len(SPARK) - 1) + 0.5), len(SPARK) - 1)])
    return "".join(line)


class Attention(NamedTuple):
    """The policy's `attention` thresholds, as the snapshot carries them, and when it was taken."""

    out_of_set_rate: float = 0.03
    min_checks: int = 20
    override_expiring_seconds: float = 600.0
    taken_at: float = 0.0  # epoch seconds

    @classmethod
    def of(cls, status: admin_pb2.GetStatusResponse) -> Attention:
        # A gateway from before these fields sends zeros: the defaults, the shipped alert's, apply.
        default = cls()
        return cls(
            status.attention_out_of_set_rate or default.out_of_set_rate,
            status.attention_min_checks or default.min_checks,
            status.attention_override_expiring_seconds or default.override_expiring_seconds,
            status.taken_at.ToNanoseconds() / 1e9,
        )


class RowSource(NamedTuple):
    """What one row is drawn from: cheap to list for every row, so only the rows in view need cells."""

    key: str
    tool: admin_pb2.ToolStatus
    argument: admin_pb2.ArgumentStatus | None  # None: a tool with no checked argument
    value_set: admin_pb2.ValueSetStatus | None
    attention: Attention = Attention()
    failures: tuple[admin_pb2.FailureOverride, ...] = ()  # the failure overrides touching the tool

    @property
    def tool_name(self) -> str:
        return self.tool.tool

    @property
    def argument_name(self) -> str:
        return self.argument.argument if self.argument is not None else NO_ARGUMENT


class Selected(NamedTuple):
    """The tool, argument and value set of a selected row."""

    tool: str
    argument: str
    value_set: str  # "" when not bound to a set

    @classmethod
    def of(cls, source: RowSource) -> Selected:
        value_set = source.argument.value_set if source.argument is not None else ""
        return cls(source.tool_name, source.argument_name, value_set)


def row_sources(status: admin_pb2.GetStatusResponse, query: str = "") -> list[RowSource]:
    """Every row, in the gateway's order, keeping those whose tool or argument contains `query`."""
    tools = {tool.tool: tool for tool in status.tools}
    sets = {value_set.name: value_set for value_set in status.value_sets}
    attention = Attention.of(status)
    failures = {
        tool.tool: tuple(failure_targets_of(tool, status.failure_overrides, status.sources)) for tool in status.tools
    }
    sources = []
    seen_tools: set[str] = set()
    for argument in status.arguments:
        seen_tools.add(argument.tool)
        tool = tools.get(argument.tool)
        if tool is not None:
            key = row_key(tool.tool, argument.argument)
            value_set = sets.get(argument.value_set)
            sources.append(RowSource(key, tool, argument, value_set, attention, failures[tool.tool]))
    for tool in status.tools:
        if tool.tool not in seen_tools and (tool.tool != "_unknown" or tool.calls):
            sources.append(RowSource(row_key(tool.tool, NO_ARGUMENT), tool, None, None, attention, failures[tool.tool]))
    needle = query.strip().lower()
    if needle:
        sources = [s for s in sources if needle in s.tool_name.lower() or needle in s.argument_name.lower()]
    return sources


def cannot_run_now(tool: admin_pb2.ToolStatus, argument: admin_pb2.ArgumentStatus | None) -> bool:
    """Whether a check of the row cannot run now (its set unavailable, its record source not answering).
    A gateway that does not say (available_now false everywhere, or no checks listed) reads as "cannot":
    its flags then go by the window's counts, as they always did."""
    checks = [c for c in tool.checks if argument is None or c.argument == argument.argument]
    return not checks or any(not check.available_now for check in checks)


def health_flags(source: RowSource, window: int) -> list[str]:
    """What on-call must act on for this row, in words, ordered by what to do: a narrow HEALTH shows the
    first ones whole and counts the rest ("+2 more"), so a source down or a check refusing calls comes
    before the staleness and out-of-set rates that follow from it (STALE first once hid SRC-DOWN)."""
    tool, argument, value_set = source.tool, source.argument, source.value_set
    figures = window_of(argument, window) if argument is not None else window_of(tool, window)
    health = []
    if value_set is not None and not value_set.source_connected:
        health.append("SRC-DOWN")
    # The window's counts say how many checks could not run; the flag stays only while one still cannot.
    failing = cannot_run_now(tool, argument)
    failed_closed = figures.problems.get("check_unavailable", 0)
    if failed_closed and failing:
        down = closed_and_down(tool, argument.argument if argument is not None else None)
        count = compact_count(failed_closed, COUNT_IN_FLAG)
        if down and all(observed(tool, check) for check in down):
            # It cannot run, and its calls pass: observed. FAIL-CLOSED says calls are refused, which is not so.
            health.append(f"{CLOSED_OBSERVED} {count}")
        elif down or not tool.checks:  # a gateway that lists no checks: the counts alone, as always
            health.append(f"FAIL-CLOSED {count}")
    failed_open = figures.failed_open
    if failed_open and failing:
        health.append(f"FAIL-OPEN {compact_count(failed_open, COUNT_IN_FLAG)}")
    storm = storm_ratio(tool)
    if storm:
        health.append(f"STORM {storm:.1f}x")
    if value_set is not None:
        if not value_set.available:
            health.append("NO-SET")
        if value_set.stale_cause in CAUSE_FLAGS:  # why it is not fresh says what to fix: before STALE itself
            health.append(CAUSE_FLAGS[value_set.stale_cause])
        if value_set.available and value_set.stale:
            health.append("STALE")
    limits = source.attention
    checks = figures.value_checks
    if argument is not None and checks >= limits.min_checks and figures.out_of_set / checks > limits.out_of_set_rate:
        health.append(f"OOS>{100 * limits.out_of_set_rate:g}%")  # the shipped alert's threshold
    tool_figures = window_of(tool, window)
    if tool_figures.repair_abandoned:
        health.append(f"ABANDONED {compact_count(tool_figures.repair_abandoned, COUNT_IN_FLAG)}")
    if tool.HasField("mode_expires_at") and tool.mode_source in ("override", "global"):
        left = tool.mode_expires_at.ToNanoseconds() / 1e9 - limits.taken_at
        if 0 <= left <= limits.override_expiring_seconds:
            health.append(f"EXPIRES {age_text(left)}")
    return health


def repair_text(figures: admin_pb2.WindowFigures) -> str:
    """succeeded/abandoned/open, which add up to the repairs started: a rejected call starts one."""
    width = 9
    succeeded, abandoned = figures.repair_succeeded, figures.repair_abandoned
    still_open = max(figures.repair_started - succeeded - abandoned, 0)
    return "/".join(compact_count(n, width) for n in (succeeded, abandoned, still_open))


def row_cells(source: RowSource, window: int, short_modes: bool = False) -> Row:
    """One row's cells for `window` seconds."""
    tool, argument, value_set = source.tool, source.argument, source.value_set
    tool_figures = window_of(tool, window)
    figures = window_of(argument, window) if argument is not None else tool_figures
    health = health_flags(source, window)
    failed_open = figures.failed_open
    name = argument.argument if argument is not None else NO_ARGUMENT
    if argument is not None:
        spark = sparkline(argument.out_of_set_per_minute, argument.checks_per_minute)
    else:
        spark = " " * SPARK_WIDTH
    repair = repair_text(tool_figures)
    age = age_text(value_set.age_seconds) if value_set is not None and value_set.available else "-"
    cells = (
        "!" if health else " ",
        tool.tool,
        name,
        mode_cell(tool, short_modes, source.failures),
        per_second(tool_figures.per_second),
        percent(figures.out_of_set, figures.value_checks) if argument is not None else "-",
        percent(figures.out_of_set_normalised, figures.value_checks) if argument is not None else "-",
        compact_count(sum(figures.problems.values()), WIDTHS["problems"]),
        spark,
        repair,
        compact_count(tool_figures.repeats, WIDTHS["repeats"]) if tool.side_effect else "-",
        compact_count(failed_open, WIDTHS["open"]),
        age,
        " ".join(health) or "ok",
    )
    return Row(
        key=source.key,
        tool=tool.tool,
        argument=name,
        value_set=argument.value_set if argument is not None else "",
        unhealthy=bool(health),
        cells=cells,
        flags=tuple(health),
        refusing=refusing_share(tool),
    )


def summary(status: admin_pb2.GetStatusResponse) -> str:
    """The replica, the policy version, the global override, the mode store, the fleet, and what needs attention."""
    override = MODE_NAMES.get(status.global_mode, "none")
    parts = [f"replica {status.replica_id}", f"policy {status.policy_version[:12]}", f"global override: {override}"]
    if status.mode_store and not status.mode_store_connected:
        parts.append(f"MODE STORE ({status.mode_store}) UNREACHABLE: enforcing the last modes known")
        if status.replicas:
            parts.append("fleet view unknown while the store is unreachable")
    else:
        if status.mode_store:
            parts.append(f"modes: {status.mode_store}")
        parts.extend(fleet_summary(status))
    if status.policy_reload_error:
        parts.append(
            f"POLICY RELOAD REFUSED (still serving {status.policy_version[:12]}): {status.policy_reload_error}"
        )
    if status.policy_promoted_from:
        parts.append(
            f"POLICY {status.policy_version[:12]} IS A PROMOTED SHADOW ({status.policy_promoted_from}): not in the "
            "--policy file, which a reload or restart serves again"
        )
    if status.shadow_version:
        parts.append(f"shadow {status.shadow_version[:12]}: {status.shadow_differences} calls differ (d)")
    foreign = [f"{o.tool} ({MODE_NAMES.get(o.mode, '?')})" for o in status.foreign_overrides]
    if foreign:
        parts.append(
            f"overrides of tools not in this policy (kept for the replicas that have them): {', '.join(foreign)}"
        )
    # A set whose source is down is named on that source's line (source_lines.py): here, the others.
    named = {name for entries in down_sources(status).values() for entry in entries for name in entry.value_sets}
    down = [
        f"{s.name} ({CAUSE_WORDS.get(s.stale_cause, 'stale')})"
        for s in status.value_sets
        if (not s.available or s.stale or not s.source_connected) and s.name not in named
    ]
    if down:
        parts.append(f"sets needing attention: {', '.join(down)}")
    return " | ".join(parts)


def fleet_summary(status: admin_pb2.GetStatusResponse) -> list[str]:
    """With a shared store: how many replicas report, which stopped, and where they disagree (version skew)."""
    if not status.replicas:
        return []
    live = [r for r in status.replicas if r.reporting]
    parts = [f"fleet: {len(live)} replica{'s' if len(live) != 1 else ''} reporting"]
    stopped = [f"{r.replica_id} ({r.seconds_since_report:.0f}s)" for r in status.replicas if not r.reporting]
    if stopped:
        parts.append("STOPPED REPORTING: " + ", ".join(stopped))
    policies = _tally(r.policy_version[:12] for r in live)
    if len(policies) > 1:
        parts.append("SKEW policy: " + ", ".join(f"{v} on {n}" for v, n in policies))
    for name in sorted({n for r in live for n in r.value_set_versions}):
        versions = _tally(str(r.value_set_versions[name]) for r in live if name in r.value_set_versions)
        if len(versions) > 1:
            parts.append(f"SKEW {name}: " + ", ".join(f"v{v} on {n}" for v, n in versions))
    for tool in sorted({t for r in live for t in r.modes}):
        modes = _tally(r.modes[tool] for r in live if tool in r.modes)
        if len(modes) > 1:
            parts.append(f"SKEW mode of {tool}: " + ", ".join(f"{m} on {n}" for m, n in modes))
    return parts


def _tally(values: Iterable[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
