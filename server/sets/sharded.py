"""The member set type for very large value sets, split into shards by hash (their indexes: compact_index.py).

CPython grows a set or dict by rehashing every entry in one C call: at a
million members that is a stall of the event loop (docs/performance.md), several times
while a set is built. Split into SHARDS tables, each resize touches 1/SHARDS of
the entries. A look-up pays one hash (cached on str) and a method call more
than a plain set, so sets below SHARD_ABOVE members stay plain.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
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

    def compact_steps(self) -> Iterator[None]:
        """Copies each shard into a table sized for what it holds, one shard a step.

        A set grown one add at a time quadruples its table while small, so a shard may
        end up to 4x its entries; a copy sizes the table at 2-4x (e.g. 84 -> 42 bytes a
        member at 100k members).
        """
        for index, shard in enumerate(self._shards):
            self._shards[index] = set(shard)
            yield

    def empty_steps(self) -> Iterator[None]:
        """Empties the set one shard a step, so that freeing it never holds the loop for the whole set. Only
        for a set nothing reads any more (let_go.py)."""
        for index in range(SHARDS):
            self._shards[index] = set()
            yield

    def __contains__(self, value: object) -> bool:
        return value in self._shards[hash(value) & _MASK]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._shards)
