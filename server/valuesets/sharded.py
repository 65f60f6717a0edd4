"""Set and index types for very large value sets, split into shards by hash.

CPython grows a set or dict by rehashing every entry in one C call: at a
million members that is a 20-60 ms stall of the event loop, several times
while a set is built. Split into SHARDS tables, each resize touches 1/SHARDS of
the entries. A look-up pays one hash (cached on str) and a method call, about
0.1 us more than a plain set, so sets below SHARD_ABOVE members stay plain.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from itertools import chain

SHARDS = 64
SHARD_ABOVE = 65_536
_MASK = SHARDS - 1


class ShardedSet(Set[str]):
    """A set of strings held in SHARDS sets. Built by `add_all`, then never mutated."""

    __slots__ = ("_shards",)

    def __init__(self) -> None:
        self._shards: list[set[str]] = [set() for _ in range(SHARDS)]

    def add_all(self, values: list[str]) -> None:
        shards = self._shards
        for value in values:
            shards[hash(value) & _MASK].add(value)

    def __contains__(self, value: object) -> bool:
        return value in self._shards[hash(value) & _MASK]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._shards)


class ShardedIndex(Mapping[str, str]):
    """normalised form -> member, held in SHARDS dicts. Built by `setdefault`, then never mutated."""

    __slots__ = ("_shards",)

    def __init__(self) -> None:
        self._shards: list[dict[str, str]] = [{} for _ in range(SHARDS)]

    def setdefault(self, key: str, value: str) -> str:
        return self._shards[hash(key) & _MASK].setdefault(key, value)

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._shards[hash(key) & _MASK].get(key, default)

    def __getitem__(self, key: str) -> str:
        return self._shards[hash(key) & _MASK][key]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._shards)
