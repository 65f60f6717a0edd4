"""Sliding windows over the gateway's cumulative counts: copies taken in the background, differences on demand.

Windows cost the hot path nothing. A sampler copies the cumulative counts
every FINE_SECONDS (kept for FINE_KEEP_SECONDS, for the 1-minute window) and
every COARSE_SECONDS (kept for an hour, for the 15-minute and 1-hour windows
and the per-minute series behind the TUI's sparklines). A window's figures are
the live counts minus the newest copy taken at or before its start, with the
seconds that copy actually covers (so a rate divides by the true span).

Copies are arrays of ints indexed by key, not dicts: at 200 tools x 5
arguments x ~8 keys, 86 copies take ~5 MB instead of ~80 MB. Over a reader
that reports only the counts that changed (`changes_only`, what the gateway
uses: count_feed.py), a copy is the one before it with those changed.

Keys are kept for the process' life unless `forget_idle` is given: then, at
each coarse copy, the keys whose count has not moved over its seconds are
dropped from every copy and handed to its callback (which drops them from the
counts), so that a reader that keeps a bounded number of keys (the calls by
signature) bounds what is happening now, not everything ever seen.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import Generic, NamedTuple, TypeVar

from argwatch.common.tasks import cancel_and_wait

FINE_SECONDS = 5.0
FINE_KEEP_SECONDS = 120.0
COARSE_SECONDS = 60.0
KEEP_SECONDS = 3600.0

Key = TypeVar("Key", bound=Hashable)  # what a count is (the gateway's: counts.CountKey)


class CountCopy(NamedTuple):
    """The cumulative counts at one moment, indexed like CountWindows.keys."""

    taken_at: float
    values: array[int]


class CountWindows(Generic[Key]):
    """Copies of the cumulative counts from `read`, so callers can ask for any recent window."""

    def __init__(
        self,
        read: Callable[[], Mapping[Key, int]],
        clock: Callable[[], float] = time.monotonic,
        forget_idle: tuple[float, Callable[[list[Key]], None]] | None = None,
        *,
        changes_only: bool = False,
    ) -> None:
        """`forget_idle`: (seconds, forget): keys whose count has not moved for that long are dropped, and
        `forget` is told them (it drops them from what `read` returns; a key back later counts from 0).
        `changes_only`: `read` returns only the keys whose count changed since its last call (every key the first
        time), and a copy is the one before it with those changed: a copy costs the traffic since, not the keys."""
        if changes_only and forget_idle is not None:
            raise ValueError("forget_idle needs every count on every read")
        self._read = read
        self._changes_only = changes_only
        self._forget_idle = forget_idle
        self._clock = clock
        self._index: dict[Key, int] = {}
        self._keys: list[Key] = []
        self._started = clock()
        start = CountCopy(self._started, array("q"))
        self._newest = start  # the last copy made, live() included: what a changes-only read changes
        self._fine: deque[CountCopy] = deque([start], maxlen=int(FINE_KEEP_SECONDS / FINE_SECONDS) + 1)
        self._coarse: deque[CountCopy] = deque([start], maxlen=int(KEEP_SECONDS / COARSE_SECONDS) + 2)
        self._task: asyncio.Task[None] | None = None
        self._series_marker: tuple[int, float] = (0, 0.0)
        self._series: dict[int, list[int]] = {}

    @property
    def keys(self) -> list[Key]:
        """Every key seen so far, in first-seen order (index i of a copy is keys[i])."""
        return self._keys

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample_forever())

    async def close(self) -> None:
        await cancel_and_wait([self._task])

    def sample(self) -> None:
        """Takes a copy now (the background task calls this every FINE_SECONDS)."""
        copy = self._copy()
        self._fine.append(copy)
        if copy.taken_at - self._coarse[-1].taken_at >= COARSE_SECONDS - FINE_SECONDS / 2:
            self._coarse.append(copy)
            if self._forget_idle is not None:
                self._drop_idle(copy, *self._forget_idle)

    def _drop_idle(self, now: CountCopy, seconds: float, forget: Callable[[list[Key]], None]) -> None:
        """Drops the keys whose count is the same now as `seconds` ago from every copy, and tells `forget`."""
        base = self._base(now.taken_at - seconds)
        if now.taken_at - base.taken_at < seconds:
            return  # the copies do not reach back that far yet
        old, values = base.values, now.values
        idle = [i for i in range(len(old)) if values[i] == old[i]]
        if not idle:
            return
        gone = set(idle)
        keep = [i for i in range(len(self._keys)) if i not in gone]
        pick = itemgetter(*keep) if len(keep) > 1 else None
        width = len(self._keys)
        shrunk: dict[int, CountCopy] = {}

        def shrink(copy: CountCopy) -> CountCopy:
            done = shrunk.get(id(copy))
            if done is None:
                full = copy.values
                if len(full) < width:
                    full = full + array("q", bytes(8 * (width - len(full))))
                kept = pick(full) if pick is not None else tuple(full[i] for i in keep)
                done = shrunk[id(copy)] = CountCopy(copy.taken_at, array("q", kept))
            return done

        self._fine = deque((shrink(copy) for copy in self._fine), maxlen=self._fine.maxlen)
        self._coarse = deque((shrink(copy) for copy in self._coarse), maxlen=self._coarse.maxlen)
        forgotten = [self._keys[i] for i in idle]
        self._keys = [self._keys[i] for i in keep]
        self._index = {key: i for i, key in enumerate(self._keys)}
        self._series_marker, self._series = (0, 0.0), {}
        forget(forgotten)

    def live(self) -> CountCopy:
        """The counts now."""
        return self._copy()

    def index_of(self, key: Key) -> int | None:
        return self._index.get(key)

    def window(self, seconds: float) -> tuple[dict[Key, int], float]:
        """The counts over the last `seconds` (0: since start) as a mapping, and the seconds they cover."""
        deltas, covered = self.window_values(seconds)
        return {key: value for key, value in zip(self._keys, deltas, strict=False) if value}, covered

    def window_values(self, seconds: float) -> tuple[list[int], float]:
        """The counts over the last `seconds` (0: since start), indexed like `keys`, and the seconds they cover."""
        return self.window_from(self.live(), seconds)

    def window_from(self, now: CountCopy, seconds: float) -> tuple[list[int], float]:
        """Like window_values, from counts `now` already read (so several windows share one read)."""
        base = self.base_for(now, seconds)
        return _minus(now.values, base.values), max(now.taken_at - base.taken_at, 0.0)

    def base_for(self, now: CountCopy, seconds: float) -> CountCopy:
        """The copy a window of `seconds` ending at `now` counts from (the start, for 0)."""
        return self._base(now.taken_at - seconds) if seconds > 0 else CountCopy(self._started, array("q"))

    def window_at(self, now: CountCopy, seconds: float, indices: Sequence[int]) -> tuple[list[int], float]:
        """Like window_from, for the keys at `indices` only, in that order: a snapshot of a few tools of many
        takes their keys' differences, not every key's."""
        base = self.base_for(now, seconds)
        covered = max(now.taken_at - base.taken_at, 0.0)
        if isinstance(indices, range) and indices.step == 1:  # a run of keys (a whole snapshot's slice): in C
            return _minus(now.values[indices.start : indices.stop], base.values[indices.start : indices.stop]), covered
        return [delta_since(now, base, i) for i in indices], covered

    def per_minute(self, now: CountCopy, index: int, points: int = 60) -> list[int]:
        """The count at `index` per COARSE_SECONDS over the last `points` intervals, oldest first, from
        counts `now`; the last point is the interval still running. Intervals before the start are 0."""
        copies = list(self._coarse)[-points:]
        marker = (len(copies), copies[-1].taken_at)
        if marker != self._series_marker:  # completed intervals change only when a coarse copy is added
            self._series_marker, self._series = marker, {}
        done = self._series.get(index)
        if done is None:
            done = self._series[index] = [
                _delta(_at(copies[i + 1].values, index), _at(copies[i].values, index)) for i in range(len(copies) - 1)
            ]
        values = [*done]
        values.append(_delta(_at(now.values, index), _at(copies[-1].values, index)))
        return [0] * (points - len(values)) + values[-points:]

    def _base(self, start: float) -> CountCopy:
        """The newest copy taken at or before `start`, else the oldest kept."""
        ring = self._fine if self._fine[0].taken_at <= start else self._coarse
        base = ring[0]
        for copy in ring:
            if copy.taken_at > start:
                break
            base = copy
        return base

    def _copy(self) -> CountCopy:
        counts = self._read()
        for key in counts:
            if key not in self._index:
                self._index[key] = len(self._keys)
                self._keys.append(key)
        if self._changes_only:
            values = array("q", self._newest.values)  # a copy of the array: copies are never changed once made
            values.frombytes(bytes(8 * (len(self._keys) - len(values))))
        else:
            values = array("q", bytes(8 * len(self._keys)))
        for key, value in counts.items():
            values[self._index[key]] = int(value)
        self._newest = CountCopy(self._clock(), values)
        return self._newest

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(FINE_SECONDS)
            self.sample()


def _at(values: array[int], index: int) -> int:
    return values[index] if index < len(values) else 0


def _delta(now: int, before: int) -> int:
    return now - before if now >= before else now  # a reset counter counts from 0 again


def delta_since(now: CountCopy, base: CountCopy, index: int | None) -> int:
    """The count at `index` (None: a key never seen, 0) from copy `base` to copy `now`, as _minus counts it."""
    if index is None:
        return 0
    return _delta(_at(now.values, index), _at(base.values, index))


def _minus(now: array[int], base: array[int]) -> list[int]:
    """now - base, element by element; keys newer than `base` count from 0. A count that went down was
    reset (a reload dropped its series), so its window starts again from 0, as Prometheus' rate() does:
    never a negative figure, which the Admin API's unsigned fields could not carry."""
    if len(base) < len(now):
        base = base + array("q", bytes(8 * (len(now) - len(base))))
    return [a - b if a >= b else a for a, b in zip(now, base, strict=False)]
