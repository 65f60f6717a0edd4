"""The count model's cumulative counts kept current from the metric series that moved, not by folding every series.

GatewayMetrics.counts() folds every series of every counting family into a
fresh dict: at 10,000 tools, some 82,000 keys from 92,000 series, a pass the
count windows took on the event loop every 5 s while Validate waited
(docs/performance.md has the figures). A CountFeed remembers, per family, each series' tally, the
count keys it folds into and the value it last read. A read takes every tally's
value in one C-level pass (map over attrgetter), compares it with the last in
another, and folds only the series that moved: what a read costs beyond those
two passes is the traffic since the last one, not the size of the catalogue.

A series removed (a reload dropped a tool's) takes its last value off its keys,
as the full fold would; a key left with no series keeps reading 0, where the
full fold leaves it out (the windows read both the same: a missing key is 0).
tests/unit/test_count_feed.py checks the feed against the full fold.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import compress, count
from operator import attrgetter, ne
from typing import Any

from argwatch.server.telemetry.counts import CountKey
from argwatch.server.telemetry.tallies import Tally, TallyFamily

Folds = Callable[[tuple[str, ...]], Iterable[CountKey]]

_VALUE = attrgetter("value")


class _Keys:
    """Every count key the feed has seen, by index, with its cumulative count; and the keys changed since the
    last read."""

    def __init__(self) -> None:
        self.index: dict[CountKey, int] = {}
        self.keys: list[CountKey] = []
        self.totals: list[int] = []
        self.changed: set[int] = set()

    def indices(self, keys: Iterable[CountKey]) -> tuple[int, ...]:
        found = []
        for key in keys:
            at = self.index.get(key)
            if at is None:
                at = self.index[key] = len(self.keys)
                self.keys.append(key)
                self.totals.append(0)
            self.changed.add(at)  # a new series is a figure, at 0 too: its keys are reported
            found.append(at)
        return tuple(found)

    def add(self, indices: tuple[int, ...], delta: int) -> None:
        totals = self.totals
        for at in indices:
            totals[at] += delta
            self.changed.add(at)


class _TallySeries:
    """One TallyFamily's series as last read, in the family's creation order."""

    def __init__(self, family: TallyFamily, folds: Folds) -> None:
        self._family, self._folds = family, folds
        self._generation = family.generation
        self._labels: list[tuple[str, ...]] = []
        self._tallies: list[Tally] = []
        self._indices: list[tuple[int, ...]] = []
        self._last: list[int] = []

    def read(self, keys: _Keys) -> None:
        if self._family.generation != self._generation:
            self._resync(keys)
        series = self._family.series()
        for labels, tally in series[len(self._tallies) :]:  # created since the last read
            self._labels.append(labels)
            self._tallies.append(tally)
            self._indices.append(keys.indices(self._folds(labels)))
            self._last.append(0)
        values = list(map(_VALUE, self._tallies))
        last, indices = self._last, self._indices
        for at in compress(count(), map(ne, values, last)):
            keys.add(indices[at], values[at] - last[at])
        self._last = values

    def _resync(self, keys: _Keys) -> None:
        """After a removal: the series still there keep their last value; a gone one's comes off its keys."""
        kept = {
            id(tally) for _labels, tally in self._family.series()
        }  # by identity: a series removed and made again is new
        fresh = _TallySeries(self._family, self._folds)
        for labels, tally, indices, last in zip(self._labels, self._tallies, self._indices, self._last, strict=True):
            if id(tally) in kept:
                fresh._labels.append(labels)
                fresh._tallies.append(tally)
                fresh._indices.append(indices)
                fresh._last.append(last)
            elif last:
                keys.add(indices, -last)
        # The family's order is its creation order less what was removed: the kept series are its prefix.
        self.__dict__.update(fresh.__dict__)


class _CollectedSeries:
    """A family read through a full pass (a prometheus_client counter, the fail-open counts): few series."""

    def __init__(self, read: Callable[[], Iterator[tuple[Any, int]]], folds: Callable[[Any], Iterable[CountKey]]):
        self._read, self._folds = read, folds
        self._last: dict[Any, tuple[tuple[int, ...], int]] = {}

    def read(self, keys: _Keys) -> None:
        now: dict[Any, tuple[tuple[int, ...], int]] = {}
        for labels, value in self._read():
            before = self._last.get(labels)
            if before is None:
                indices = keys.indices(self._folds(labels))
                before = (indices, 0)
            indices, last = before
            if value != last:
                keys.add(indices, value - last)
            now[labels] = (indices, value)
        for labels, (indices, last) in self._last.items():
            if labels not in now and last:
                keys.add(indices, -last)
        self._last = now


class CountFeed:
    """Reads the cumulative counts of `families` (and of `extra`), reporting only the keys that changed."""

    def __init__(
        self,
        families: Iterable[tuple[TallyFamily | Any, Folds]],
        series_of: Callable[[Any], Iterator[tuple[tuple[str, ...], int]]],
        extra: tuple[Callable[[], Iterator[tuple[Any, int]]], Callable[[Any], Iterable[CountKey]]] | None = None,
    ) -> None:
        """`series_of(family)` lists a non-tally family's series and counts; `extra` is one more (read, folds)
        pair read in full each time."""
        self._keys = _Keys()
        self._readers: list[_TallySeries | _CollectedSeries] = []
        for family, folds in families:
            if isinstance(family, TallyFamily):
                self._readers.append(_TallySeries(family, folds))
            else:
                self._readers.append(_CollectedSeries(functools.partial(series_of, family), folds))
        if extra is not None:
            self._readers.append(_CollectedSeries(*extra))

    def changes(self) -> Mapping[CountKey, int]:
        """The keys whose cumulative count changed since the last call (and every key of a series created since),
        with their counts now. The first call reports every key."""
        keys = self._keys
        for reader in self._readers:
            reader.read(keys)
        changed, keys.changed = keys.changed, set()
        return {keys.keys[at]: keys.totals[at] for at in changed}
