"""Per tool and per argument figures over the Admin API's sliding windows (1 min, 15 min, 1 h).

Reads one copy of the live counts and answers every window and series from it,
so a WatchStatus snapshot of 200 tools x 5 arguments costs one read. Each
window's counts are folded into the count model (counts.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from argwatch.server.policy.model import Policy
from argwatch.server.telemetry.count_windows import CountCopy, CountWindows
from argwatch.server.telemetry.counts import (
    ArgumentCounts,
    CheckKind,
    Count,
    CountKey,
    CountTable,
    ToolCounts,
    fold_windows,
)

WINDOWS_SECONDS = (60, 900, 3600)
# A tool's calls and refusals over the last 15 s (20 s at most: the fine copies are 5 s apart), for "refusing
# X% now": the minute lagged a flip or a recovery by a minute. Only those two counts per tool, read by index:
# no fold of every key, so it costs a snapshot O(tools), not a fourth window.
RECENT_SECONDS = 15


class WindowFigures(NamedTuple):
    """One row's counts over one window."""

    window_seconds: int
    covered_seconds: float
    per_second: float  # calls/s on a tool row, values checked/s on an argument row
    counts: ToolCounts | ArgumentCounts


class CohortWindows(NamedTuple):
    """One argument's value checks by one model and prompt version (as the policy declares them)."""

    model: str
    prompt_version: str
    windows: tuple[WindowFigures, ...]


class ArgumentWindows(NamedTuple):
    tool: str
    argument: str
    value_set: str  # "" when the argument is not bound to a set
    windows: tuple[WindowFigures, ...]
    checks_per_minute: list[int]
    out_of_set_per_minute: list[int]


class ToolWindows(NamedTuple):
    tool: str
    windows: tuple[WindowFigures, ...]
    calls_per_minute: list[int]
    recent: WindowFigures  # RECENT_SECONDS: calls and rejected only


class StatusFigures(NamedTuple):
    """Every row's figures, all from one copy of the counts, computed as asked for (so a caller can
    yield to the event loop between rows)."""

    tool: Callable[[str], ToolWindows]
    arguments: Iterator[ArgumentWindows]
    totals: dict[str, ToolCounts]  # per tool label, since start (the same copy of the counts)


class _Span(NamedTuple):
    seconds: int
    covered: float
    table: CountTable


def _at_index(values: list[int], index: int | None) -> int:
    return values[index] if index is not None and index < len(values) else 0


def _per_second(count: int, covered: float) -> float:
    return count / covered if covered > 0 else 0.0


class StatusWindows:
    """Builds StatusFigures from a CountWindows fed by GatewayMetrics.counts."""

    def __init__(self, policy: Policy, windows: CountWindows[CountKey]) -> None:
        self._policy = policy
        self._windows = windows
        self._argument_rows: list[tuple[str, str, str]] | None = None  # by the first snapshot, not by a reload

    def _spans(self, now: CountCopy, *, since_start: bool = False) -> list[_Span]:
        """Each window's counts (and, with `since_start`, the counts since start last), folded in one pass."""
        seconds_each = (*WINDOWS_SECONDS, 0) if since_start else WINDOWS_SECONDS
        windows = [self._windows.window_from(now, seconds) for seconds in seconds_each]
        tables = fold_windows(self._windows.keys, [deltas for deltas, _covered in windows])
        return [
            _Span(seconds, covered, table)
            for seconds, (_deltas, covered), table in zip(seconds_each, windows, tables, strict=True)
        ]

    def figures(self) -> StatusFigures:
        now = self._windows.live()
        *spans, since_start = self._spans(now, since_start=True)
        recent, recent_covered = self._windows.window_from(now, RECENT_SECONDS)

        def recent_of(tool: str) -> WindowFigures:
            calls, rejected = (
                _at_index(recent, self._windows.index_of(CountKey(tool, "", what)))
                for what in (Count.CALLS, Count.REJECTED)
            )
            counts = ToolCounts(calls=calls, rejected=rejected)
            return WindowFigures(RECENT_SECONDS, recent_covered, _per_second(calls, recent_covered), counts)

        def tool_windows(tool: str) -> ToolWindows:
            windows = []
            for span in spans:
                counts = span.table.tool(tool)
                windows.append(
                    WindowFigures(span.seconds, span.covered, _per_second(counts.calls, span.covered), counts)
                )
            calls_per_minute = self._series(now, CountKey(tool, "", Count.CALLS))
            return ToolWindows(tool, tuple(windows), calls_per_minute, recent_of(tool))

        def arguments() -> Iterator[ArgumentWindows]:
            for tool, argument, value_set in self._rows_with():
                windows = []
                for span in spans:
                    counts = span.table.argument(tool, argument)
                    per_second = _per_second(counts.checks, span.covered)
                    windows.append(WindowFigures(span.seconds, span.covered, per_second, counts))
                checks = CountKey(tool, argument, Count.CHECKS, check=CheckKind.VALUE_SET)
                out_of_set = checks._replace(what=Count.OUT_OF_SET)
                yield ArgumentWindows(
                    tool, argument, value_set, tuple(windows), self._series(now, checks), self._series(now, out_of_set)
                )

        return StatusFigures(tool_windows, arguments(), since_start.table.tools)

    def cohorts(self, tool: str, argument: str) -> tuple[CohortWindows, ...]:
        """One argument's value checks per model and prompt version, over each window, in name order."""
        if not self._policy.cohorts.declared:
            return ()
        spans = self._spans(self._windows.live())
        seen = sorted({cohort for span in spans for cohort in span.table.cohorts.get((tool, argument), {})})
        result = []
        for model, version in seen:
            windows = []
            for span in spans:
                counts = span.table.cohorts.get((tool, argument), {}).get((model, version)) or ArgumentCounts()
                windows.append(
                    WindowFigures(span.seconds, span.covered, _per_second(counts.checks, span.covered), counts)
                )
            result.append(CohortWindows(model, version, tuple(windows)))
        return tuple(result)

    def _series(self, now: CountCopy, key: CountKey) -> list[int]:
        index = self._windows.index_of(key)
        return self._windows.per_minute(now, index) if index is not None else [0] * 60

    def _rows_with(self) -> list[tuple[str, str, str]]:
        """The policy's rows, then any (tool, argument) the counts name that the policy lists no row for
        (call-level problems "_call", invented arguments "_unknown")."""
        if self._argument_rows is None:
            self._argument_rows = _argument_rows(self._policy)
        rows = self._argument_rows
        listed = {(tool, argument) for tool, argument, _set in rows}
        named = {(key.tool, key.argument) for key in self._windows.keys if key.argument}
        extra = sorted(named - listed)
        return [*rows, *((tool, argument, "") for tool, argument in extra)]


def _argument_rows(policy: Policy) -> list[tuple[str, str, str]]:
    """(tool, argument, value set) per argument the policy checks: set bindings, then record ids, then the
    rest of the arguments it knows (schema properties), in policy order."""
    rows: list[tuple[str, str, str]] = []
    for tool in policy.tools.values():
        seen: set[str] = set()
        for binding in tool.arguments:
            rows.append((tool.name, binding.name, binding.value_set))
            seen.add(binding.name)
        for record in tool.records:
            if record.id_argument not in seen:
                rows.append((tool.name, record.id_argument, ""))
                seen.add(record.id_argument)
        rows.extend((tool.name, argument, "") for argument in sorted(tool.known_arguments - seen))
    return rows
