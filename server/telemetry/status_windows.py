"""Per tool and per argument figures over the Admin API's sliding windows (1 min, 15 min, 1 h).

Reads one copy of the live counts and answers every window and series from it,
so a WatchStatus snapshot of 200 tools x 5 arguments costs one read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from argwatch.server.policy.model import Policy
from argwatch.server.telemetry.count_windows import CountCopy, CountWindows, Key
from argwatch.server.telemetry.metrics import COHORT_PREFIX, parse_cohort_what

WINDOWS_SECONDS = (60, 900, 3600)


class Figures(NamedTuple):
    """One row's counts over one window."""

    window_seconds: int
    covered_seconds: float
    per_second: float  # calls/s on a tool row, values checked/s on an argument row
    calls: int
    rejected: int
    value_checks: int
    out_of_set: int
    out_of_set_normalised: int
    problems: dict[str, int]  # by code
    repair_started: int
    repair_succeeded: int
    repair_abandoned: int
    failed_open: int
    repeats: int = 0  # repeats of an operation of a tool with side effects (tool rows)
    # Tool rows: calls reject mode refuses (any problem), and those with an invented value among them.
    with_problems: int = 0
    with_invented: int = 0
    shapes: dict[str, int] | None = None  # argument rows: out-of-set values by shape

    @property
    def out_of_set_rate(self) -> float:
        return self.out_of_set / self.value_checks if self.value_checks else 0.0

    @property
    def out_of_set_normalised_rate(self) -> float:
        return self.out_of_set_normalised / self.value_checks if self.value_checks else 0.0


class CohortFigures(NamedTuple):
    """One argument's value checks by one model and prompt version (as the policy declares them)."""

    model: str
    prompt_version: str
    windows: tuple[Figures, ...]  # only the value-check figures are filled


class ArgumentFigures(NamedTuple):
    tool: str
    argument: str
    value_set: str  # "" when the argument is not bound to a set
    windows: tuple[Figures, ...]
    checks_per_minute: list[int]
    out_of_set_per_minute: list[int]


class ToolFigures(NamedTuple):
    tool: str
    windows: tuple[Figures, ...]
    calls_per_minute: list[int]


class StatusFigures(NamedTuple):
    """Every row's figures, all from one copy of the counts, computed as asked for (so a caller can
    yield to the event loop between rows)."""

    tool: Callable[[str], ToolFigures]
    arguments: Iterator[ArgumentFigures]


class StatusWindows:
    """Builds StatusFigures from a CountWindows fed by GatewayMetrics.window_counts."""

    def __init__(self, policy: Policy, windows: CountWindows) -> None:
        self._policy = policy
        self._windows = windows
        self._rows = _argument_rows(policy)

    def figures(self) -> StatusFigures:
        now = self._windows.live()
        keys = self._windows.keys
        spans = [(seconds, *self._windows.window_from(now, seconds)) for seconds in WINDOWS_SECONDS]
        # (tool, argument) -> per window, what -> count; tool rows under argument "".
        grouped: dict[tuple[str, str], list[dict[str, int]]] = {}
        for position, (tool, argument, what) in enumerate(keys):
            per_window = grouped.setdefault((tool, argument), [{} for _ in spans])
            for slot, (_seconds, deltas, _covered) in enumerate(spans):
                if position < len(deltas) and deltas[position]:
                    per_window[slot][what] = deltas[position]
        empty: list[dict[str, int]] = [{} for _ in spans]
        arguments_of: dict[str, list[list[dict[str, int]]]] = {}
        for (tool, argument), per_window in grouped.items():
            if argument:
                arguments_of.setdefault(tool, []).append(per_window)

        def tool_figures(tool: str) -> ToolFigures:
            counts = grouped.get((tool, ""), empty)
            per_argument = arguments_of.get(tool, [])
            return ToolFigures(
                tool=tool,
                windows=tuple(
                    _figures(seconds, covered, counts[slot], per_argument, slot, tool_row=True)
                    for slot, (seconds, _deltas, covered) in enumerate(spans)
                ),
                calls_per_minute=self._series(now, (tool, "", "calls")),
            )

        def arguments() -> Iterator[ArgumentFigures]:
            for tool, argument, value_set in self._rows_with(grouped):
                counts = grouped.get((tool, argument), empty)
                yield ArgumentFigures(
                    tool=tool,
                    argument=argument,
                    value_set=value_set,
                    windows=tuple(
                        _figures(seconds, covered, counts[slot], (), slot, tool_row=False)
                        for slot, (seconds, _deltas, covered) in enumerate(spans)
                    ),
                    checks_per_minute=self._series(now, (tool, argument, "checks")),
                    out_of_set_per_minute=self._series(now, (tool, argument, "out_of_set")),
                )

        return StatusFigures(tool_figures, arguments())

    def cohorts(self, tool: str, argument: str) -> tuple[CohortFigures, ...]:
        """One argument's value checks per model and prompt version, over each window."""
        if not self._policy.cohorts.declared:
            return ()
        now = self._windows.live()
        spans = [(seconds, *self._windows.window_from(now, seconds)) for seconds in WINDOWS_SECONDS]
        counts: list[dict[str, int]] = [{} for _ in spans]
        for position, (row_tool, row_argument, what) in enumerate(self._windows.keys):
            if row_tool == tool and row_argument == argument and what.startswith(COHORT_PREFIX):
                for slot, (_seconds, deltas, _covered) in enumerate(spans):
                    if position < len(deltas) and deltas[position]:
                        counts[slot][what] = deltas[position]
        return _cohorts(counts, spans)

    def _series(self, now: CountCopy, key: Key) -> list[int]:
        index = self._windows.index_of(key)
        return self._windows.per_minute(now, index) if index is not None else [0] * 60

    def _rows_with(self, grouped: dict[tuple[str, str], list[dict[str, int]]]) -> list[tuple[str, str, str]]:
        """The policy's rows, then any (tool, argument) the counts name that the policy lists no row for
        (call-level problems "_call", invented arguments "_unknown")."""
        listed = {(tool, argument) for tool, argument, _set in self._rows}
        extra = sorted(key for key in grouped if key[1] and key not in listed)
        return [*self._rows, *((tool, argument, "") for tool, argument in extra)]


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


def _cohorts(counts: list[dict[str, int]], spans: Sequence[tuple[int, object, float]]) -> tuple[CohortFigures, ...]:
    """The argument's value checks per (model, prompt version) seen in any window, in name order."""
    split: dict[tuple[str, str], list[dict[str, int]]] = {}
    for slot, slot_counts in enumerate(counts):
        for what, value in slot_counts.items():
            if (parsed := parse_cohort_what(what)) is not None:
                model, version, kind = parsed
                split.setdefault((model, version), [{} for _ in spans])[slot][kind] = value
    return tuple(
        CohortFigures(
            model,
            version,
            tuple(
                _figures(seconds, covered, per_window[slot], (), slot, tool_row=False)
                for slot, (seconds, _deltas, covered) in enumerate(spans)
            ),
        )
        for (model, version), per_window in sorted(split.items())
    )


def _figures(
    seconds: int,
    covered: float,
    counts: dict[str, int],
    per_argument: Sequence[list[dict[str, int]]],
    slot: int,
    *,
    tool_row: bool,
) -> Figures:
    """One window's figures; a tool row sums its arguments' value checks, problems and fail-opens."""
    merged = dict(counts) if per_argument else counts
    for argument_counts in per_argument:
        for what, value in argument_counts[slot].items():
            merged[what] = merged.get(what, 0) + value
    problems = {what[8:]: value for what, value in merged.items() if what.startswith("problem:")}
    calls = merged.get("calls", 0)
    checks = merged.get("checks", 0)
    return Figures(
        window_seconds=seconds,
        covered_seconds=covered,
        per_second=(calls if tool_row else checks) / covered if covered > 0 else 0.0,
        calls=calls,
        rejected=merged.get("reject", 0),
        value_checks=checks,
        out_of_set=merged.get("out_of_set", 0),
        out_of_set_normalised=merged.get("out_of_set_normalised", 0),
        problems=problems,
        repair_started=merged.get("repair_started", 0),
        repair_succeeded=merged.get("repair_succeeded", 0),
        repair_abandoned=merged.get("repair_abandoned", 0),
        failed_open=merged.get("failed_open", 0),
        repeats=merged.get("repeats", 0),
        with_problems=merged.get("with_problems", 0),
        with_invented=merged.get("with_invented", 0),
        shapes={what[6:]: value for what, value in merged.items() if what.startswith("shape:")},
    )
