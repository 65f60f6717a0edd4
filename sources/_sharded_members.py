"""An immutable set of strings that changes in proportion to the change: shards by hash, copied on write.

An owner's set may hold a million members and change a hundred times a
second. A frozenset would have to be copied whole to add one value, and a
mutable set cannot be streamed to a gateway across awaits (it would change
under the stream). Here a set is a tuple of SHARDS frozensets, a value's shard
picked by its hash: a change copies only the shards it touches, and every
version stays whole and unchanged for as long as anything reads it.

Small sets keep one shard (a copy of a small frozenset is cheap and a tuple of
SHARDS empty shards is not); a set that grows past SHARD_ABOVE members is cut
into SHARDS once, and keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Set
from itertools import chain
from typing import Any

SHARDS = 4096  # a power of two: a value's shard is hash(value) & (SHARDS - 1)
SHARD_ABOVE = 4096
_EMPTY: frozenset[str] = frozenset()


class ShardedMembers(Set[str]):
    """A frozen set of strings; `changed` makes the next version in O(change x members / SHARDS)."""

    __slots__ = ("_mask", "_shards", "_size")

    def __init__(self, values: Iterable[str] = ()) -> None:
        """The set of `values`.

        Args:
            values: The members (repeats are kept once).
        """
        whole = values if isinstance(values, frozenset) else frozenset(values)
        if len(whole) <= SHARD_ABOVE:
            self._set((whole,), 0, len(whole))
        else:
            self._set(_cut(whole), SHARDS - 1, len(whole))

    def _set(self, shards: tuple[frozenset[str], ...], mask: int, size: int) -> None:
        self._shards, self._mask, self._size = shards, mask, size

    def __contains__(self, value: object) -> bool:
        return value in self._shards[hash(value) & self._mask]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return self._size

    @classmethod
    def _from_iterable(cls, values: Iterable[Any]) -> frozenset[Any]:
        # What Set's operators (|, &, -) return: a plain frozenset, not another sharded set.
        return frozenset(values)

    def __hash__(self) -> int:
        return self._hash()

    def minus(self, other: ShardedMembers) -> list[str]:
        """The members that `other` lacks: shard by shard when both are cut alike (in C), else one by one."""
        if other._mask == self._mask:
            return [value for mine, theirs in zip(self._shards, other._shards, strict=True) for value in mine - theirs]
        return [value for value in self if value not in other]

    def changed(self, added: Iterable[str] = (), removed: Iterable[str] = ()) -> ShardedMembers:
        """The next version: this set with `removed` taken out, then `added` put in; this one is unchanged.

        Args:
            added: Values to add (those already members are no change).
            removed: Values to take out (those not members are no change).
        """
        shards, mask = self._shards, self._mask
        taken: dict[int, set[str]] = {}
        put: dict[int, set[str]] = {}
        for value in removed:
            taken.setdefault(hash(value) & mask, set()).add(value)
        for value in added:
            put.setdefault(hash(value) & mask, set()).add(value)
        if not taken and not put:
            return self
        copied = list(shards)
        size = self._size
        for index in taken.keys() | put.keys():
            before = shards[index]
            after = (before - taken.get(index, _EMPTY)) | put.get(index, _EMPTY)
            copied[index] = after
            size += len(after) - len(before)
        following = ShardedMembers.__new__(ShardedMembers)
        if mask == 0 and size > SHARD_ABOVE:
            following._set(_cut(copied[0]), SHARDS - 1, size)
        else:
            following._set(tuple(copied), mask, size)
        return following


def _cut(whole: frozenset[str]) -> tuple[frozenset[str], ...]:
    parts: list[list[str]] = [[] for _ in range(SHARDS)]
    mask = SHARDS - 1
    for value in whole:
        parts[hash(value) & mask].append(value)
    return tuple(frozenset(part) if part else _EMPTY for part in parts)
