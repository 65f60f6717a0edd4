"""Members received in several parts (or per scope), read as one sequence without copying them together."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from typing import overload

from argwatch.server.sets.scoped import SEPARATOR, usable_scope


class MemberParts(Sequence[str]):
    """The concatenation of `parts` (protobuf repeated fields, lists or tuples), never copied whole."""

    def __init__(self, parts: Sequence[Sequence[str]]) -> None:
        self._parts = list(parts)
        self._starts = [0, *accumulate(len(part) for part in self._parts)]

    def __len__(self) -> int:
        return self._starts[-1]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._parts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            out: list[str] = []
            part = bisect.bisect_right(self._starts, start) - 1
            while start < stop and part < len(self._parts):
                offset = start - self._starts[part]
                take = min(stop, self._starts[part + 1]) - start
                out.extend(self._parts[part][offset : offset + take])
                start += take
                part += 1
            return out
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        part = bisect.bisect_right(self._starts, index) - 1
        return self._parts[part][index - self._starts[part]]


class ScopeKeys(Sequence[str]):
    """A scoped set's members from the wire, (scope, members) per entry, read as scope keys (sets/scoped.py)
    a slice at a time: a million members are never turned into keys in one pass on the event loop.

    An entry whose scope cannot name one (empty, too long, holding NUL) reads as keys with an empty scope, which
    the snapshot's build refuses (bad_scope), so no key is ever split at another place than its owner meant.
    """

    def __init__(self, entries: Sequence[tuple[str, Sequence[str]]]) -> None:
        self._prefixes = [(scope if usable_scope(scope) else "") + SEPARATOR for scope, _ in entries]
        self._members = MemberParts([members for _, members in entries])
        self._starts = self._members._starts

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[str]:
        for prefix, members in zip(self._prefixes, self._members._parts, strict=True):
            for value in members:
                yield prefix + value

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if not isinstance(index, slice):
            if index < 0:
                index += len(self)
            if not 0 <= index < len(self):
                raise IndexError(index)
            entry = bisect.bisect_right(self._starts, index) - 1
            return self._prefixes[entry] + self._members[index]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return list(self)[index]
        out: list[str] = []
        entry = bisect.bisect_right(self._starts, start) - 1
        parts = self._members._parts
        while start < stop and entry < len(parts):
            offset = start - self._starts[entry]
            take = min(stop, self._starts[entry + 1]) - start
            prefix = self._prefixes[entry]
            out.extend([prefix + value for value in parts[entry][offset : offset + take]])
            start += take
            entry += 1
        return out
