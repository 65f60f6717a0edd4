"""A sequence of members received in several parts, read as one without copying them together."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from typing import overload


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
