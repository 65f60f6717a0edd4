"""What one shadow has found since it was loaded: counts per tool and kind, and a few examples each (bounded).

Keys are a tool's label (a tool of the live or the shadow policy, `_unknown`
for any other name a caller sends) and a kind: at most (tools + 1) x 3 rows,
whatever callers send. Each row keeps its newest EXAMPLES_PER_ROW examples.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from argwatch.server.shadow.compare import Example, Kind

EXAMPLES_PER_ROW = 5


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One tool and kind: how many calls, and the newest examples (newest first)."""

    tool: str
    kind: Kind
    count: int
    examples: tuple[Example, ...]


@dataclass(frozen=True, slots=True)
class ReportSnapshot:
    """The report as read at one moment (immutable, so the Admin API may take its time with it)."""

    version: str
    name: str  # where it came from, as given (a file's path, or what SetShadowPolicy named)
    since: float
    calls: int
    busy: int
    raised: int
    rows: tuple[ReportRow, ...]
    unavailable_sets: tuple[str, ...]  # the shadow's sets with no copy to check against now


@dataclass
class _Row:
    count: int = 0
    # An example, or what makes it: built when a report is asked for, not for each differing call (most are
    # pushed out of the row by newer ones before anyone reads them).
    examples: deque[Example | Callable[[], Example]] = field(default_factory=lambda: deque(maxlen=EXAMPLES_PER_ROW))


class ShadowReport:
    """The tallies of one loaded shadow; a new shadow starts a new report."""

    def __init__(self, version: str, name: str, since: float) -> None:
        self.version, self.name, self.since = version, name, since
        self.calls = 0  # judged by the shadow (busy and raised left out)
        self.busy = 0
        self.raised = 0
        self._rows: dict[tuple[str, Kind], _Row] = {}

    def differed(self, label: str, kind: Kind, found: Example | Callable[[], Example]) -> None:
        """Counts one differing call under `label` (a policy's tool or `_unknown`: never a caller's text)."""
        row = self._rows.get((label, kind))
        if row is None:
            row = self._rows[label, kind] = _Row()
        row.count += 1
        row.examples.append(found)

    def snapshot(self, unavailable_sets: tuple[str, ...] = ()) -> ReportSnapshot:
        rows = tuple(
            ReportRow(tool, kind, row.count, tuple(_made(found) for found in reversed(row.examples)))
            for (tool, kind), row in sorted(self._rows.items(), key=lambda item: (item[0][0], item[0][1].value))
        )
        return ReportSnapshot(
            self.version, self.name, self.since, self.calls, self.busy, self.raised, rows, unavailable_sets
        )


def _made(found: Example | Callable[[], Example]) -> Example:
    return found if isinstance(found, Example) else found()
