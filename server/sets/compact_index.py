"""A normalised-form index for very large sets that stores no normalised strings, only hashes and positions.

A dict from normalised form to member costs, per member, a new string (the
normalised form: ~70-80 bytes for a 17-character value) plus a dict entry
(~40 bytes): over 110 bytes a member, more than the members themselves. This
index keeps two flat arrays instead, the hash of each normalised form and the
position of its member in the set's list of members, in an open-addressing
table at most half full: 24 bytes a slot pair, ~24-48 bytes a member, with no
Python object per entry (so the cycle collector has nothing to traverse).

A look-up hashes the key, walks the probe sequence comparing hashes, and
confirms a hash match by normalising the candidate member again.
That is fine here: the index is read only after a value missed the set itself,
never on the path of a passing call. The table is sized once, from the member
count, so it never rehashes (no long C call while a million members go in).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence

_EMPTY = -1


class CompactIndex(Mapping[str, str]):
    """normalised form -> first member (in source order) with that form. Filled by `add`, then never mutated."""

    __slots__ = ("_apply", "_count", "_hashes", "_mask", "_members", "_slots")

    def __init__(self, apply: Callable[[str], str], members: Sequence[str], capacity: int) -> None:
        # `members` is the set's list in source order, shared by all of its indexes and filled by the caller.
        size = 16
        while size < 2 * capacity:
            size *= 2
        self._apply = apply
        self._members = members
        self._mask = size - 1
        self._hashes = array("q", [0]) * size
        self._slots = array("i" if capacity < 2**31 else "q", [_EMPTY]) * size
        self._count = 0

    @property
    def members(self) -> Sequence[str]:
        """The member list the index points into (shared by every index of the set)."""
        return self._members

    def add(self, position: int) -> None:
        """Indexes members[position] under its normalised form, unless an earlier member holds that form."""
        members, apply, hashes, slots, mask = self._members, self._apply, self._hashes, self._slots, self._mask
        key = apply(members[position])
        hashed = hash(key)
        slot = hashed & mask
        while (held := slots[slot]) != _EMPTY:
            if hashes[slot] == hashed and apply(members[held]) == key:
                return
            slot = (slot + 1) & mask
        if self._count * 2 >= len(slots):
            raise OverflowError("CompactIndex is full: it was sized for fewer members")
        hashes[slot] = hashed
        slots[slot] = position
        self._count += 1

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        members, apply, hashes, slots, mask = self._members, self._apply, self._hashes, self._slots, self._mask
        hashed = hash(key)
        slot = hashed & mask
        while (held := slots[slot]) != _EMPTY:
            if hashes[slot] == hashed:
                member = members[held]
                if apply(member) == key:
                    return member
            slot = (slot + 1) & mask
        return default

    def __getitem__(self, key: str) -> str:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        members, apply = self._members, self._apply
        return (apply(members[held]) for held in self._slots if held != _EMPTY)

    def __len__(self) -> int:
        return self._count

    def table_bytes(self) -> int:
        """What the two arrays hold (the members list is the set's, not this index's)."""
        return self._hashes.itemsize * len(self._hashes) + self._slots.itemsize * len(self._slots)
