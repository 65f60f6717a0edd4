"""One typed count model: what the gateway counts per tool and per checked argument, and the figures folded from it.

Every cumulative count is a CountKey (tool, argument path, check kind, what is
counted, its detail and the model that wrote the call) with an integer value.
GatewayMetrics.counts() reads them from the hot path's tallies; the Admin API's
windows (count_windows.py, status_windows.py), the shape report and replay fold
them with `fold` into ToolCounts and ArgumentCounts. Nothing keys a figure by a
string it builds: adding a count is one Count member, one field, and the metric
row that feeds it (metric_table.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple


class Count(enum.StrEnum):
    """What one count counts. A str: keys are hashed on every count read, and Enum's own __hash__ is Python."""

    # Per tool (CountKey.argument ""):
    CALLS = "calls"
    ALLOWED = "allowed"
    REJECTED = "rejected"
    WITH_PROBLEMS = "with_problems"  # calls with any problem: what reject mode refuses
    WITH_INVENTED = "with_invented"  # of those, calls with an invented value
    REPAIR_STARTED = "repair_started"
    REPAIR_SUCCEEDED = "repair_succeeded"
    REPAIR_ABANDONED = "repair_abandoned"
    REPEATS = "repeats"
    UNAVAILABLE = "unavailable"  # checks not run: their set could not be read (failed open or closed)
    STALE_CHECKS = "stale_checks"  # checks run against a stale copy of their set
    # Per checked argument:
    CHECKS = "checks"
    OUT_OF_SET = "out_of_set"
    OUT_OF_SET_NORMALISED = "out_of_set_normalised"
    FAILED_OPEN = "failed_open"
    PROBLEM = "problem"  # detail: the problem's code
    SHAPE = "shape"  # detail: why an out-of-set value missed


class CheckKind(enum.StrEnum):
    """Which check a count is about: a dimension of every count below the tool."""

    CALL = "call"  # the whole call (per-tool counts)
    VALUE_SET = "value_set"
    ANY = "any"  # problems, from whichever check found them


NOT_SPLIT: tuple[str, str] | tuple[()] = ()  # the cohort of a count not split by model and prompt version


class CountKey(NamedTuple):
    """One cumulative count's identity."""

    tool: str
    argument: str  # "" for a count of the whole call; an argument's path otherwise
    what: Count
    detail: str = ""  # the problem code (PROBLEM) or the shape (SHAPE)
    check: CheckKind = CheckKind.CALL
    cohort: tuple[str, str] | tuple[()] = NOT_SPLIT  # (model, prompt version), as the policy declares them


@dataclass(slots=True)
class ArgumentCounts:
    """One checked argument's counts (or their sum over a tool's arguments)."""

    checks: int = 0
    out_of_set: int = 0
    out_of_set_normalised: int = 0
    failed_open: int = 0
    problems: dict[str, int] = field(default_factory=dict)  # by code
    shapes: dict[str, int] = field(default_factory=dict)  # out-of-set values by shape

    @property
    def out_of_set_rate(self) -> float:
        return self.out_of_set / self.checks if self.checks else 0.0

    @property
    def out_of_set_normalised_rate(self) -> float:
        return self.out_of_set_normalised / self.checks if self.checks else 0.0

    def add(self, count: Count, detail: str, value: int) -> None:
        if count is Count.PROBLEM:
            self.problems[detail] = self.problems.get(detail, 0) + value
        elif count is Count.SHAPE:
            self.shapes[detail] = self.shapes.get(detail, 0) + value
        else:
            name = count.value
            setattr(self, name, getattr(self, name) + value)

    def absorb(self, other: ArgumentCounts) -> None:
        """Adds another argument's counts to these (a tool's row sums its arguments')."""
        self.checks += other.checks
        self.out_of_set += other.out_of_set
        self.out_of_set_normalised += other.out_of_set_normalised
        self.failed_open += other.failed_open
        for code, value in other.problems.items():
            self.problems[code] = self.problems.get(code, 0) + value
        for shape, value in other.shapes.items():
            self.shapes[shape] = self.shapes.get(shape, 0) + value


@dataclass(slots=True)
class ToolCounts(ArgumentCounts):
    """One tool's counts: the whole call's, and the sum of its arguments' (ArgumentCounts' fields)."""

    calls: int = 0
    allowed: int = 0
    rejected: int = 0
    with_problems: int = 0
    with_invented: int = 0
    repair_started: int = 0
    repair_succeeded: int = 0
    repair_abandoned: int = 0
    repeats: int = 0
    unavailable: int = 0
    stale_checks: int = 0

    @property
    def rejected_rate(self) -> float:
        """The share of calls refused (decision REJECT): over the last minute, the TUI's "refusing X% now"."""
        return self.rejected / self.calls if self.calls else 0.0


@dataclass(slots=True)
class CountTable:
    """Counts folded: per tool (arguments summed in), per (tool, argument), and per (tool, argument, cohort)."""

    tools: dict[str, ToolCounts] = field(default_factory=dict)
    arguments: dict[tuple[str, str], ArgumentCounts] = field(default_factory=dict)
    cohorts: dict[tuple[str, str], dict[tuple[str, str], ArgumentCounts]] = field(default_factory=dict)

    def tool(self, tool: str) -> ToolCounts:
        return self.tools.get(tool) or ToolCounts()

    def argument(self, tool: str, argument: str) -> ArgumentCounts:
        return self.arguments.get((tool, argument)) or ArgumentCounts()


def fold(counts: Mapping[CountKey, int] | Iterable[tuple[CountKey, int]]) -> CountTable:
    """Folds cumulative (or windowed) counts into per-tool and per-argument figures."""
    items = list(counts.items() if isinstance(counts, Mapping) else counts)
    (table,) = fold_windows([key for key, _ in items], [[value for _, value in items]])
    return table


def fold_windows(keys: Sequence[CountKey], windows: Sequence[Sequence[int]]) -> list[CountTable]:
    """Folds several windows of the same keys (each `windows[i][j]` is the count of `keys[j]`) in one pass.

    Called on the event loop for every status snapshot, over every key of the policy (hundreds of
    thousands at the largest policies documented): each key is read once for all windows, rows are
    summed as plain dicts, and each row's counts object is built once at the end. WindowFold does it a
    slice of keys at a time, for a caller that lets other work run between slices.
    """
    fold = WindowFold(len(windows))
    fold.add(keys, windows)
    return fold.tables()


class WindowFold:
    """fold_windows in parts: `add` the keys a slice at a time (each slice's counts per window), then `tables`."""

    def __init__(self, windows: int) -> None:
        self._slots = range(windows)
        self._tools: dict[str, list[dict[str, Any]]] = {}
        self._arguments: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._cohorts: dict[tuple[str, str], dict[tuple[str, str], list[dict[str, Any]]]] = {}

    def add(self, keys: Sequence[CountKey], windows: Sequence[Sequence[int]]) -> None:
        slots, tools, arguments, cohorts = self._slots, self._tools, self._arguments, self._cohorts
        for key, *values in zip(keys, *windows, strict=False):
            tool, argument, what, detail, _check, cohort = key
            name = what._value_  # a plain attribute: Enum's .value is a descriptor, dear at this rate
            if cohort:
                split = cohorts.setdefault((tool, argument), {})
                rows = split.get(cohort)
                if rows is None:
                    rows = split[cohort] = [{} for _ in slots]
                for row, value in zip(rows, values, strict=True):
                    if value:
                        _add(row, name, detail, value)
                continue
            # A series that exists at zero is still a row (GatewayMetrics.zero_series): it gets its entry.
            tool_rows = tools.get(tool)
            if tool_rows is None:
                tool_rows = tools[tool] = [{} for _ in slots]
            if argument:
                argument_rows = arguments.get((tool, argument))
                if argument_rows is None:
                    argument_rows = arguments[tool, argument] = [{} for _ in slots]
                if name in _BY_DETAIL:
                    for tool_row, argument_row, value in zip(tool_rows, argument_rows, values, strict=True):
                        if value:
                            _add(tool_row, name, detail, value)
                            _add(argument_row, name, detail, value)
                else:  # the common case, inline: a function call per key and window is most of the cost
                    for tool_row, argument_row, value in zip(tool_rows, argument_rows, values, strict=True):
                        if value:
                            tool_row[name] = tool_row.get(name, 0) + value
                            argument_row[name] = argument_row.get(name, 0) + value
            else:
                for tool_row, value in zip(tool_rows, values, strict=True):
                    if value:
                        _add(tool_row, name, detail, value)

    def tables(self) -> list[CountTable]:
        return [self.table(slot) for slot in self._slots]

    def table(self, slot: int) -> CountTable:
        """The table of window `slot` (one at a time: a caller may yield between them)."""
        return CountTable(
            {tool: ToolCounts(**rows[slot]) for tool, rows in self._tools.items()},
            {key: _argument_counts(rows[slot]) for key, rows in self._arguments.items()},
            {
                key: {cohort: _argument_counts(rows[slot]) for cohort, rows in split.items() if rows[slot]}
                for key, split in self._cohorts.items()
            },
        )


_ARGUMENT_FIELDS = frozenset(field.name for field in fields(ArgumentCounts))


_BY_DETAIL = frozenset({Count.PROBLEM._value_, Count.SHAPE._value_})  # counted per code or shape


def _add(row: dict[str, Any], name: str, detail: str, value: int) -> None:
    if name in _BY_DETAIL:
        by_detail = row.get(name + "s")
        if by_detail is None:
            by_detail = row[name + "s"] = {}
        by_detail[detail] = by_detail.get(detail, 0) + value
    else:
        row[name] = row.get(name, 0) + value


def _argument_counts(row: dict[str, Any]) -> ArgumentCounts:
    if row.keys() <= _ARGUMENT_FIELDS:
        return ArgumentCounts(**row)
    return ArgumentCounts(**{name: value for name, value in row.items() if name in _ARGUMENT_FIELDS})
