"""The shared cache's local half: keys with a lifetime, in this process, at a dictionary's cost.

aiocache's SimpleMemoryCache did this job at ~5 us a read and ~10 us a write
with a lifetime here (this store: ~0.5 and ~1.5 us): every call passes its
decorators (one reads an environment variable), and every lifetime is a
loop.call_later timer. The repeat check of a tool with side
effects makes two such operations on every call, so this store keeps an
expiry time per key instead: a read past it is a miss, and expired keys are
swept from a heap as later writes come in. Nothing here awaits.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Any


class LocalMemory:
    """Key -> value, each key with an optional lifetime in seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[Any, float]] = {}  # key -> (value, expires at; inf: never)
        self._expiries: list[tuple[float, str]] = []  # a heap; an entry may be outdated by a later set

    def get(self, key: str) -> Any:
        """The value, or None when absent or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        return entry[0]

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        now = self._clock()
        expires = now + ttl if ttl is not None else math.inf
        self._entries[key] = (value, expires)
        if ttl is not None:
            heapq.heappush(self._expiries, (expires, key))
        self._sweep(now)

    def add(self, key: str, value: Any, ttl: float | None = None) -> bool:
        """Stores `value` unless `key` holds a live value; True when stored."""
        if self.get(key) is not None:
            return False
        self.set(key, value, ttl)
        return True

    def delete(self, key: str) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _sweep(self, now: float, most: int = 4) -> None:
        """Drops up to `most` expired keys: amortised, so memory follows the live keys without a timer."""
        expiries, entries = self._expiries, self._entries
        for _ in range(most):
            if not expiries or expiries[0][0] > now:
                return
            expires, key = heapq.heappop(expiries)
            entry = entries.get(key)
            if entry is not None and entry[1] == expires:  # not renewed since this expiry was pushed
                del entries[key]
