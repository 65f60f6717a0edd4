"""Deltas on large sets in proportion to the delta: a new snapshot that shares the previous one's tables.

A version produced by a delta keeps the base tables (members and indexes, which
may hold a million entries) and layers small `added` and `removed` sets on top,
so a one-value change costs one value, not a re-index of the whole set. When the
layers grow past max(COMPACT_MIN, base/COMPACT_RATIO), the set is due to be
compacted: the table rebuilds it in full in the background (in chunks, on the
loop) while deltas keep being layered, then replays those deltas over the new
base (set_table.py). Only layers HARD_FACTOR times that size, which a
compaction that keeps up never reaches, make the next delta wait for a rebuild.

One simplification: when a removed member shared a loose form with a member
that remains (in the base, or added by an earlier delta), the loose look-up
for that form finds nothing until the next full rebuild or compaction (a shape
may then read `invented` where `separator` was due, and a normalised binding
miss a member). Membership itself is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from itertools import chain
from types import MappingProxyType

from argwatch.server.policy.model import Normalisation
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate
from argwatch.server.sets.retired import KEEP_ALL, RetiredKeep
from argwatch.server.sets.scoped import OverlayListing, value_of, within_scope
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.sets.updates import retired_after

COMPACT_MIN = 4096
COMPACT_RATIO = 64
HARD_FACTOR = 4


class OverlaySet(Set[str]):
    """base - removed + added, never copied: `added` is disjoint from base, `removed` a subset of it."""

    __slots__ = ("_size", "added", "base", "removed")

    def __init__(self, base: Set[str], added: frozenset[str], removed: frozenset[str]) -> None:
        self.base, self.added, self.removed = base, added, removed
        self._size = len(base) - len(removed) + len(added)

    def __contains__(self, value: object) -> bool:
        return value in self.added or (value in self.base and value not in self.removed)

    def __iter__(self) -> Iterator[str]:
        return chain(self.added, (value for value in self.base if value not in self.removed))

    def __len__(self) -> int:
        return self._size


class OverlayIndex(Mapping[str, str]):
    """A base index minus entries pointing at removed members, plus an index of the added members."""

    __slots__ = ("added", "base", "removed")

    def __init__(self, base: Mapping[str, str], added: Mapping[str, str], removed: frozenset[str]) -> None:
        self.base, self.added, self.removed = base, added, removed

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        found = self.added.get(key)
        if found is not None:
            return found
        found = self.base.get(key)
        return found if found is not None and found not in self.removed else default

    def __getitem__(self, key: str) -> str:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return chain(self.added, (key for key, member in self.base.items() if member not in self.removed))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def with_delta(
    current: ValueSetSnapshot,
    delta: DeltaUpdate,
    *,
    now: float,
    rules: tuple[Normalisation, ...],
    keep: RetiredKeep = KEEP_ALL,
    min_base: int = PACK_ABOVE,
) -> ValueSetSnapshot | None:
    """The next version as layers over `current`'s tables, in O(delta); None when the set must be rebuilt
    first: a set of at most `min_base` members (small sets rebuild quickly enough, and keep their sorted
    list), or layers past HARD_FACTOR times what makes a compaction due."""
    if isinstance(current.members, OverlaySet):
        base, added, removed = current.members.base, set(current.members.added), set(current.members.removed)
    elif current.size > min_base:
        base, added, removed = current.members, set(), set()
    else:
        return None
    gained: list[str] = []  # values this delta puts in the added layer
    lost: list[str] = []  # and those it takes out of it
    for value in delta.removed:
        if value in added:
            added.discard(value)
            lost.append(value)
        elif value in base:
            removed.add(value)
    for value in delta.added:
        if value in removed:
            removed.discard(value)
        elif value not in base and value not in added:
            added.add(value)
            gained.append(value)
    if len(added) + len(removed) > HARD_FACTOR * _due_at(base):
        return None
    # The history, as apply_delta keeps it: O(history), which the policy's retired_keep bounds (once, every
    # member a delta removed stayed retired for ever, and each delta cost more than the one before).
    history = retired_after(current, delta, now).keep_to(keep)
    members = OverlaySet(base, frozenset(added), frozenset(removed))
    retired = frozenset(history)
    loose = normaliser(LOOSE)
    scoped = current.scoped
    return ValueSetSnapshot(
        name=current.name,
        version=delta.to_version,
        members=members,
        sorted_members=(),
        retired=retired,
        retirements=history,
        received_at=now,
        loose_index=_layered(current.loose_index, within_scope(loose) if scoped else loose, members, gained, lost),
        by_rule=MappingProxyType(
            {
                rule: _layered(
                    index, within_scope(normaliser(rule)) if scoped else normaliser(rule), members, gained, lost
                )
                for rule, index in current.by_rule.items()
            }
        ),
        loose_retired=history.loose_forms(),
        scoped=scoped,
        # A scoped set's listing and value index, layered the same way (the same simplification applies to the
        # value index: a value removed from one scope and held by another may read `invented` until a rebuild).
        by_scope=(
            OverlayListing.layered(current.by_scope, gained, lost, members.removed) if scoped else current.by_scope
        ),
        holders=_layered(current.holders, value_of, members, gained, lost) if scoped else current.holders,
    )


def base_members(snapshot: ValueSetSnapshot) -> Set[str]:
    """The members a snapshot rests on: a layered copy's base, else its own."""
    members = snapshot.members
    return members.base if isinstance(members, OverlaySet) else members


def compaction_due(snapshot: ValueSetSnapshot) -> bool:
    """Whether the snapshot's layers have grown enough to rebuild its base (in the background)."""
    members = snapshot.members
    return isinstance(members, OverlaySet) and len(members.added) + len(members.removed) > _due_at(members.base)


def _due_at(base: Set[str]) -> int:
    return max(COMPACT_MIN, len(base) // COMPACT_RATIO)


def _layered(
    index: Mapping[str, str], apply: Callable[[str], str], members: OverlaySet, gained: list[str], lost: list[str]
) -> OverlayIndex:
    """The base of `index` (unwrapping a previous layer) with the members' removals, and the previous layer's
    index of additions changed by this delta's: a C-level copy and O(delta) normalisations, not one per value
    the layers hold (which made each delta cost the layers, and a busy large set fall behind its owner)."""
    if isinstance(index, OverlayIndex):
        base, added = index.base, dict(index.added)
    else:
        base, added = index, {}
    for member in lost:
        form = apply(member)
        if added.get(form) == member:
            # Another added member of the same form is found again only after the next compaction (the
            # simplification in the module docstring).
            del added[form]
    for member in gained:
        added.setdefault(apply(member), member)
    return OverlayIndex(base, added, members.removed)
