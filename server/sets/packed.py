"""Large value sets as the checker reads them: packed members (_packed.c) seen as a Set, its indexes as Mappings.

Sets above PACK_ABOVE members are held packed: the members' UTF-8 once, in one
blob, and flat tables of 32-bit positions into it (_packed.c says what each
costs). Smaller sets stay plain Python sets and dicts, which also keep a
sorted list for repair messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence, Set

from argwatch.server.sets._packed import PackedIndex, PackedSet
from argwatch.server.sets.scoped import MAX_SCOPE_CHARS, MalformedScope, value_of

PACK_ABOVE = 65_536


class PackedMembers(PackedSet, Set[str]):
    """A large set's members: `add_all` chunk by chunk while it is built, then never changed."""

    __slots__ = ("__weakref__",)  # one a set: where it is let go can be watched (test_compaction.py)

    def __init__(self, capacity: int, scoped: bool = False) -> None:
        super().__init__(capacity, scoped, MAX_SCOPE_CHARS)

    def add_chunk(self, values: list[str]) -> range:
        """Adds the values not already held; the positions they took. A scoped chunk with a key that names no
        usable scope is refused whole (MalformedScope), before any of it is added."""
        start = len(self)
        try:
            self.add_all(values)
        except ValueError as error:  # only a scoped set's check raises it
            raise MalformedScope(str(error)) from None
        return range(start, len(self))

    def __iter__(self) -> Iterator[str]:
        # A generator, not map(): a list() of it in a thread (a save) runs bytecode between members, so the
        # event loop can take the GIL back meanwhile instead of waiting out a million decodes in one C call.
        at = self.at
        return (at(position) for position in range(len(self)))


class PackedForms(PackedIndex, Mapping[str, str]):  # type: ignore[misc]
    """normalised form -> the first member (in the order added) with that form, over a PackedMembers."""

    __slots__ = ()

    def __getitem__(self, key: str) -> str:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        apply, at = self.apply, self.members.at
        return (apply(at(position)) for position in self.positions())


class PackedListing(Mapping[str, Sequence[str]]):
    """A scoped PackedMembers' scope -> its keys, in the order added: what repair lists for one scope."""

    __slots__ = ("_members",)

    def __init__(self, members: PackedMembers) -> None:
        self._members = members

    def __getitem__(self, scope: str) -> Sequence[str]:
        keys = self._members.scope_keys(scope)
        if not keys:
            raise KeyError(scope)
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._members.scope_names())

    def __len__(self) -> int:
        return len(self._members.scope_names())


class PackedHolders(Mapping[str, str]):
    """A scoped PackedMembers' value -> a key holding it in some scope: what tells another scope's member from an
    invented value (for the counts only)."""

    __slots__ = ("_members",)

    def __init__(self, members: PackedMembers) -> None:
        self._members = members

    def __getitem__(self, value: str) -> str:
        found = self._members.holder(value)
        if found is None:
            raise KeyError(value)
        return found

    def get(self, value: str, default: str | None = None) -> str | None:  # type: ignore[override]
        found = self._members.holder(value)
        return default if found is None else found

    def __iter__(self) -> Iterator[str]:
        holder = self._members.holder
        return (value for key in self._members if holder(value := value_of(key)) == key)

    def __len__(self) -> int:
        return sum(1 for _ in self)
