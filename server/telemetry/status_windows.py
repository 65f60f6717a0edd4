"""Per tool and per argument figures over the Admin API's sliding windows (1 min, 15 min, 1 h).

Reads one copy of the live counts and answers every window and series from it,
so a WatchStatus snapshot of 200 tools x 5 arguments costs one read. Each
window's counts are folded into the count model (counts.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Generator, Iterator, Sequence
from typing import NamedTuple

from argwatch.server.policy.model import Policy
from argwatch.server.telemetry.count_windows import CountCopy, CountWindows, delta_since
from argwatch.server.telemetry.counts import (
    ArgumentCounts,
    CheckKind,
    Count,
    CountKey,
    CountTable,
    ToolCounts,
    WindowFold,
)

WINDOWS_SECONDS = (60, 900, 3600)
# A tool's calls and refusals over the last 15 s (20 s at most: the fine copies are 5 s apart), for "refusing
# X% now": the minute lagged a flip or a recovery by a minute. Only those two counts per tool, read by index:
# no fold of every key, so it costs a snapshot O(tools), not a fourth window.
RECENT_SECONDS = 15
KEYS_PER_SLICE = 5_000  # keys folded between yields to the event loop, in a status snapshot


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


class AttentionFigures(NamedTuple):
    """What ranks one tool for on-call (Admin's TOOL_ORDER_ATTENTION): its last minute, and its refusals over
    the last RECENT_SECONDS."""

    calls_per_second: float
    # Its worst argument's out-of-set rate: of the arguments with at least the policy's attention_min_checks
    # checks if any has, else of those with any. Per argument, as the TUI flags OOS>: a tool's rate summed over
    # its arguments hid one argument at 50 % beside a busy one at 0 %.
    worst_out_of_set_rate: float
    worst_checks: int  # that argument's checks
    skipped: int  # checks that could not run (failed open or closed)
    refused_share: float


# The keys an attention rank reads: (what, on an argument row) and where each adds up: per tool, calls (0),
# skipped checks (1) and refusals (2); per argument, value checks (0) and out-of-set values (1).
_RANKED = {
    (Count.CALLS, False): 0,
    (Count.UNAVAILABLE, False): 1,
    (Count.REJECTED, False): 2,
    (Count.CHECKS, True): 0,
    (Count.OUT_OF_SET, True): 1,
}


class KeyIndex:
    """The windows' keys by tool, and the keys an attention rank reads as (tool, argument, where, index); kept up
    to date as keys are added (the gateway's windows' keys only grow), and across reloads (the keys are the
    windows')."""

    def __init__(self) -> None:
        self.by_tool: dict[str, list[int]] = {}
        self.ranked: list[tuple[str, str, int, int]] = []
        self._indexed = 0

    def update(self, keys: Sequence[CountKey]) -> None:
        if len(keys) < self._indexed:  # keys were forgotten (not done to the gateway's windows): index anew
            self.by_tool, self.ranked, self._indexed = {}, [], 0
        for index in range(self._indexed, len(keys)):
            key = keys[index]
            self.by_tool.setdefault(key.tool, []).append(index)
            if not key.cohort and (key.check is CheckKind.VALUE_SET or not key.argument):
                position = _RANKED.get((key.what, bool(key.argument)))
                if position is not None:
                    self.ranked.append((key.tool, key.argument, position, index))
        self._indexed = len(keys)


class _Span(NamedTuple):
    seconds: int
    covered: float
    table: CountTable


def _per_second(count: int, covered: float) -> float:
    return count / covered if covered > 0 else 0.0


class StatusWindows:
    """Builds StatusFigures from a CountWindows fed by GatewayMetrics.counts."""

    def __init__(self, policy: Policy, windows: CountWindows[CountKey], index: KeyIndex | None = None) -> None:
        """`index`: the key index of the StatusWindows before a reload, over the same windows."""
        self._policy = policy
        self._windows = windows
        # The policy's argument rows by tool, made by the first snapshot, not by a reload.
        self._argument_rows: dict[str, list[tuple[str, str, str]]] | None = None
        # So that a snapshot of a few tools reads only their keys.
        self.index = index if index is not None else KeyIndex()
        self._searchable: dict[str, str] = {}
        self._searchable_at = -1
        self._named: set[tuple[str, str]] = set()
        self._named_at = -1

    def live(self) -> CountCopy:
        """The counts now, for figures() and attention() to share one read."""
        return self._windows.live()

    def has_tool(self, tool: str) -> bool:
        """Whether any count names `tool` (the "_unknown" row exists once a call named an unknown tool)."""
        self._index_keys()
        return tool in self.index.by_tool

    def _index_keys(self) -> None:
        self.index.update(self._windows.keys)

    def _spans(self, now: CountCopy, *, since_start: bool = False, tools: Collection[str] | None = None) -> list[_Span]:
        """Each window's counts (and, with `since_start`, the counts since start last), folded in one pass;
        with `tools`, only their keys."""
        steps = self._fold_steps(now, (*WINDOWS_SECONDS, 0) if since_start else WINDOWS_SECONDS, tools)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                spans: list[_Span] = done.value
                return spans

    def _fold_steps(
        self, now: CountCopy, seconds_each: Sequence[int], tools: Collection[str] | None
    ) -> Generator[None, None, list[_Span]]:
        """_spans a step at a time: it stops after each KEYS_PER_SLICE keys folded and each window's table
        built, so that an async caller can let calls in between (figures_in_slices); returns the spans."""
        every_key = self._windows.keys
        if tools is None:
            indices: Sequence[int] = range(len(every_key))
        else:
            self._index_keys()
            indices = sorted(index for tool in tools for index in self.index.by_tool.get(tool, ()))
        fold = WindowFold(len(seconds_each))
        for start in range(0, len(indices), KEYS_PER_SLICE):
            part = indices[start : start + KEYS_PER_SLICE]
            deltas = [self._windows.window_at(now, seconds, part)[0] for seconds in seconds_each]
            fold.add([every_key[index] for index in part], deltas)
            yield
        spans = []
        for slot, seconds in enumerate(seconds_each):
            covered = max(now.taken_at - self._windows.base_for(now, seconds).taken_at, 0.0)
            spans.append(_Span(seconds, covered, fold.table(slot)))
            yield
        return spans

    def attention(self, now: CountCopy, min_checks: int) -> dict[str, AttentionFigures]:
        """Per tool with counts, what ranks it for on-call: the minute's calls, skipped checks and worst argument
        (AttentionFigures), and the share of calls refused over the last RECENT_SECONDS. Reads only the few keys
        per tool and argument that these need, not every key."""
        self._index_keys()
        minute, recent = self._windows.base_for(now, 60), self._windows.base_for(now, RECENT_SECONDS)

        def delta(base: CountCopy, index: int) -> int:
            return delta_since(now, base, index)

        tools: dict[str, list[int]] = {}  # calls, skipped, refused (recent), calls (recent)
        arguments: dict[tuple[str, str], list[int]] = {}  # checks, out of set
        for tool, argument, position, index in self.index.ranked:
            if argument:
                value = delta(minute, index)
                if value:
                    arguments.setdefault((tool, argument), [0, 0])[position] += value
                continue
            row = tools.get(tool)
            if position == 2:
                value = delta(recent, index)
            else:
                value = delta(minute, index)
                if position == 0 and value:  # the calls over the recent window too, for the refused share
                    row = row if row is not None else tools.setdefault(tool, [0, 0, 0, 0])
                    row[3] += delta(recent, index)
            if value:
                row = row if row is not None else tools.setdefault(tool, [0, 0, 0, 0])
                row[position] += value
        worst: dict[str, tuple[bool, float, int]] = {}
        for (tool, _argument), (checks, out_of_set) in arguments.items():
            if checks:
                candidate = (checks >= min_checks, out_of_set / checks, checks)
                if tool not in worst or candidate > worst[tool]:
                    worst[tool] = candidate
        covered = max(now.taken_at - minute.taken_at, 0.0)
        figures = {}
        for tool in tools.keys() | worst.keys():
            calls, skipped, refused, recent_calls = tools.get(tool, (0, 0, 0, 0))
            _enough, rate, checks = worst.get(tool, (False, 0.0, 0))
            share = refused / recent_calls if recent_calls else 0.0
            figures[tool] = AttentionFigures(_per_second(calls, covered), rate, checks, skipped, share)
        return figures

    def figures(self, tools: Sequence[str] | None = None, now: CountCopy | None = None) -> StatusFigures:
        """Every row's figures; with `tools`, only those tools' (their keys alone are read and folded)."""
        now = self._windows.live() if now is None else now
        return self._figures_from(now, self._spans(now, since_start=True, tools=tools), tools)

    async def figures_in_slices(
        self,
        pause: Callable[[], Awaitable[None]],
        tools: Sequence[str] | None = None,
        now: CountCopy | None = None,
    ) -> StatusFigures:
        """figures(), folding KEYS_PER_SLICE keys between calls of `pause` (which lets calls in): at 10,000
        tools the fold of every key held the event loop well over a tenth of a second in one turn."""
        now = self._windows.live() if now is None else now
        steps = self._fold_steps(now, (*WINDOWS_SECONDS, 0), tools)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                spans: list[_Span] = done.value
                break
            await pause()
        if tools is None:
            self._named_rows()  # every key's rows, made now between yields rather than in the first row's turn
            await pause()
        return self._figures_from(now, spans, tools)

    def _figures_from(self, now: CountCopy, all_spans: list[_Span], tools: Sequence[str] | None) -> StatusFigures:
        *spans, since_start = all_spans
        recent = self._windows.base_for(now, RECENT_SECONDS)
        recent_covered = max(now.taken_at - recent.taken_at, 0.0)

        def recent_of(tool: str) -> WindowFigures:
            # Two keys read by index: a snapshot of a few tools does not take every key's difference for these.
            calls, rejected = (
                delta_since(now, recent, self._windows.index_of(CountKey(tool, "", what)))
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
            for tool, argument, value_set in self._rows_with(tools):
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
        spans = self._spans(self._windows.live(), tools=(tool,))
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

    def searchable(self, tool: str) -> str:
        """`tool`'s name and its argument rows' names, in lower case, one a line: what a status selection's
        `contains` is looked for in. Kept until a count names a new key (an argument the policy lacks)."""
        if self._searchable_at != len(self._windows.keys):
            self._searchable, self._searchable_at = {}, len(self._windows.keys)
        text = self._searchable.get(tool)
        if text is None:
            names = [tool, *(argument for _tool, argument, _set in self._rows_with((tool,)))]
            text = self._searchable[tool] = "\n".join(names).lower()
        return text

    def _named_rows(self) -> set[tuple[str, str]]:
        """(tool, argument) of every key that names an argument; made again only when keys were added."""
        keys = self._windows.keys
        if self._named_at != len(keys):
            self._named, self._named_at = {(key.tool, key.argument) for key in keys if key.argument}, len(keys)
        return self._named

    def _rows_with(self, tools: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
        """The policy's rows (of `tools` only, in their order, when given), then any (tool, argument) the counts
        name that the policy lists no row for (call-level problems "_call", invented arguments "_unknown")."""
        if self._argument_rows is None:
            self._argument_rows = _argument_rows(self._policy)
        by_tool = self._argument_rows
        if tools is None:
            rows = [row for tool_rows in by_tool.values() for row in tool_rows]
            named = self._named_rows()
        else:
            rows = [row for tool in dict.fromkeys(tools) for row in by_tool.get(tool, ())]
            self._index_keys()
            every_key = self._windows.keys
            named = {
                (tool, every_key[index].argument)
                for tool in tools
                for index in self.index.by_tool.get(tool, ())
                if every_key[index].argument
            }
        listed = {(tool, argument) for tool, argument, _set in rows}
        extra = sorted(named - listed)
        return [*rows, *((tool, argument, "") for tool, argument in extra)]


def _argument_rows(policy: Policy) -> dict[str, list[tuple[str, str, str]]]:
    """(tool, argument, value set) per argument the policy checks, by tool: set bindings, then record ids,
    then the rest of the arguments it knows (schema properties), in policy order."""
    by_tool: dict[str, list[tuple[str, str, str]]] = {}
    for tool in policy.tools.values():
        rows = by_tool[tool.name] = []
        seen: set[str] = set()
        for binding in tool.arguments:
            rows.append((tool.name, binding.name, binding.value_set))
            seen.add(binding.name)
        for record in tool.records:
            if record.id_argument not in seen:
                rows.append((tool.name, record.id_argument, ""))
                seen.add(record.id_argument)
        rows.extend((tool.name, argument, "") for argument in sorted(tool.known_arguments - seen))
    return by_tool
