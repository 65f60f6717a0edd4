"""The one bounded TTL store: keys with a lifetime, in this process, at a dictionary's cost, never past a size.

It is the shared cache's local half and the record client's cache. aiocache's
SimpleMemoryCache did the first job at about ten times this store's cost
(docs/performance.md): every call passes its decorators (one
reads an environment variable), and every lifetime is a loop.call_later timer.
So each key keeps its expiry time instead: a read past it is a miss, and
expired keys are swept from a heap as later writes come in. Nothing here awaits.

Keys come from callers (conversation and call ids, record ids the model wrote),
so the store is bounded: at `max_entries` a new key first sweeps what has
expired, then evicts the key closest to expiry, and counts it in `evictions`.
The heap of expiries is rebuilt when renewals leave it far larger than the
store, so renewing one key forever cannot grow it either.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

DEFAULT_MAX_ENTRIES = 100_000
# Keys are compared in the heap when expiries tie: strings, or tuples of them.
K = TypeVar("K", str, tuple[str, str])


class TtlStore(Generic[K]):
    """Key -> value, each key with an optional lifetime in seconds, at most `max_entries` keys."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        on_evict: Callable[[], None] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self._clock = clock
        self._on_evict = on_evict  # counts each eviction where the owner can see it (a metric)
        self._max = max_entries
        self._entries: dict[K, tuple[Any, float]] = {}  # key -> (value, expires at; inf: never)
        self._expiries: list[tuple[float, K]] = []  # a heap; an entry may be outdated by a later set
        self.evictions = 0  # live keys dropped to stay within max_entries

    def get(self, key: K) -> Any:
        """The value, or None when absent or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        return entry[0]

    def set(self, key: K, value: Any, ttl: float | None = None) -> None:
        now = self._clock()
        if key not in self._entries and len(self._entries) >= self._max:
            self._make_room(now)
        expires = now + ttl if ttl is not None else math.inf
        self._entries[key] = (value, expires)
        if ttl is not None:
            heapq.heappush(self._expiries, (expires, key))
            if len(self._expiries) > 2 * len(self._entries) + 64:
                self._rebuild_heap()
        self._sweep(now)

    def add(self, key: K, value: Any, ttl: float | None = None) -> bool:
        """Stores `value` unless `key` holds a live value; True when stored."""
        if self.get(key) is not None:
            return False
        self.set(key, value, ttl)
        return True

    def delete(self, key: K) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _sweep(self, now: float, most: int = 4) -> bool:
        """Drops up to `most` expired keys: amortised, so memory follows the live keys without a timer.
        True when it stopped early because nothing more has expired."""
        expiries, entries = self._expiries, self._entries
        for _ in range(most):
            if not expiries or expiries[0][0] > now:
                return True
            expires, key = heapq.heappop(expiries)
            entry = entries.get(key)
            if entry is not None and entry[1] == expires:  # not renewed since this expiry was pushed
                del entries[key]
        return False

    def _make_room(self, now: float) -> None:
        """Full: drop what has expired; failing that, the live key closest to expiry (or the oldest kept forever)."""
        while len(self._entries) >= self._max and not self._sweep(now, most=64):
            pass
        while len(self._entries) >= self._max:
            if self._expiries:
                expires, key = heapq.heappop(self._expiries)
                entry = self._entries.get(key)
                if entry is None or entry[1] != expires:
                    continue  # an outdated heap entry
            else:
                key = next(iter(self._entries))
            del self._entries[key]
            self.evictions += 1
            if self._on_evict is not None:
                self._on_evict()

    def _rebuild_heap(self) -> None:
        self._expiries = [(expires, key) for key, (_, expires) in self._entries.items() if expires != math.inf]
        heapq.heapify(self._expiries)
