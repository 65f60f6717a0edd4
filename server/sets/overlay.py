"""Deltas on large sets in proportion to the delta: a new snapshot that shares the previous one's tables.

A version produced by a delta keeps the base tables (members and indexes, which
may hold a million entries) and layers small `added` and `removed` sets on top,
so a one-value change costs one value, not a re-index of the whole set. The
layers are two levels: a delta copies only the top one (FOLD_AT values and one
delta at most), which folds into the level below once past that; the retired
history is layered likewise (retired.LayeredHistory). When the layers, both
levels counted, grow past max(COMPACT_MIN, base/COMPACT_RATIO), the set is due
to be compacted: the table rebuilds it in full in the background (in chunks,
on the loop) while deltas keep being layered, then replays those deltas over
the new base (set_table.py). Only layers HARD_FACTOR times that size, which a
compaction that keeps up never reaches, make the next delta wait for a rebuild.

One simplification: when a removed member shared a loose form with a member
that remains (in the base, or added by an earlier delta), the loose look-up
for that form finds nothing until the next full rebuild or compaction (a shape
may then read `invented` where `separator` was due, and a normalised binding
miss a member). Membership itself is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import replace
from itertools import chain
from types import MappingProxyType

from argwatch.server.policy.model import Normalisation
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate
from argwatch.server.sets.retired import KEEP_ALL, LayeredHistory, RetiredKeep
from argwatch.server.sets.scoped import OverlayListing, value_of, within_scope
from argwatch.server.sets.snapshot import ValueSetSnapshot

COMPACT_MIN = 4096
COMPACT_RATIO = 64
HARD_FACTOR = 4
# Values the top level of layers holds before it folds into the level below (with_delta).
FOLD_AT = 512


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
    list), or layers past HARD_FACTOR times what makes a compaction due.

    Two levels of layers: a delta copies only the top one (FOLD_AT values and one delta at most), which folds into the
    level below once it passes that; a single level grew to thousands of values between compactions, and
    copying it every delta (and the collector traversing each copy) was most of a busy set's loop time."""
    members = current.members
    if not isinstance(members, OverlaySet) and current.size <= min_base:
        return None
    history = LayeredHistory.over(current.retirements).after(delta.removed, delta.added, delta.replaced_by, now, keep)
    if isinstance(members, OverlaySet) and isinstance(members.base, OverlaySet):
        if len(members.added) + len(members.removed) <= FOLD_AT:
            layered = _layer(current, delta.added, delta.removed, on_top=False)
        else:  # the top folded into the level below (O(that level), once every FOLD_AT values), then a new top
            folded = _layer(_below(current), members.added, members.removed, on_top=False)
            layered = _layer(folded, delta.added, delta.removed, on_top=True)
    else:  # no layer yet (a first level over the base), or one (a top over it)
        layered = _layer(current, delta.added, delta.removed, on_top=True)
    if _layered_values(layered.members) > HARD_FACTOR * _due_at(base_members(layered)):
        return None
    return replace(
        layered,
        version=delta.to_version,
        sorted_members=(),
        retired=history,
        retirements=history,
        received_at=now,
        loose_retired=history.loose_forms(),
    )


def _below(snapshot: ValueSetSnapshot) -> ValueSetSnapshot:
    """The snapshot as its level below the top reads it: each table's layer taken off."""
    members = snapshot.members
    assert isinstance(members, OverlaySet)
    by_scope = snapshot.by_scope
    holders = snapshot.holders
    return replace(
        snapshot,
        members=members.base,
        loose_index=_under(snapshot.loose_index),
        by_rule=MappingProxyType({rule: _under(index) for rule, index in snapshot.by_rule.items()}),
        by_scope=by_scope.base if isinstance(by_scope, OverlayListing) else by_scope,
        holders=_under(holders),
    )


def _under(index: Mapping[str, str]) -> Mapping[str, str]:
    return index.base if isinstance(index, OverlayIndex) else index


def _layer(current: ValueSetSnapshot, put: Iterable[str], taken: Iterable[str], *, on_top: bool) -> ValueSetSnapshot:
    """`current` with `taken` values removed and `put` added (in that order, as a delta reads), as a new
    layer over its tables (`on_top`) or by changing its top layer: O(the layer changed), never O(set)."""
    members = current.members
    if not on_top and isinstance(members, OverlaySet):
        base, added, removed = members.base, set(members.added), set(members.removed)
    else:
        base, added, removed = members, set(), set()
    gained: list[str] = []  # values this change puts in the added layer
    lost: list[str] = []  # and those it takes out of it
    for value in taken:
        if value in added:
            added.discard(value)
            lost.append(value)
        elif value in base:
            removed.add(value)
    for value in put:
        if value in removed:
            removed.discard(value)
        elif value not in base and value not in added:
            added.add(value)
            gained.append(value)
    layered = OverlaySet(base, frozenset(added), frozenset(removed))
    loose = normaliser(LOOSE)
    scoped = current.scoped

    def index(previous: Mapping[str, str], apply: Callable[[str], str]) -> OverlayIndex:
        return _layered(previous, apply, layered, gained, lost, on_top)

    by_scope = current.by_scope
    if scoped:
        # A scoped set's listing and value index, layered the same way (the same simplification applies to
        # the value index: a value removed from one scope and held by another may read `invented` until a
        # rebuild).
        by_scope = OverlayListing.layered(by_scope, gained, lost, layered.removed, on_top=on_top)
    return replace(
        current,
        members=layered,
        loose_index=index(current.loose_index, within_scope(loose) if scoped else loose),
        by_rule=MappingProxyType(
            {
                rule: index(previous, within_scope(normaliser(rule)) if scoped else normaliser(rule))
                for rule, previous in current.by_rule.items()
            }
        ),
        by_scope=by_scope,
        holders=index(current.holders, value_of) if scoped else current.holders,
    )


def _layered_values(members: Set[str]) -> int:
    """How many values the layers over the base hold, every level counted."""
    count = 0
    while isinstance(members, OverlaySet):
        count += len(members.added) + len(members.removed)
        members = members.base
    return count


def base_members(snapshot: ValueSetSnapshot) -> Set[str]:
    """The members a snapshot rests on: a layered copy's base (under every level), else its own."""
    members = snapshot.members
    while isinstance(members, OverlaySet):
        members = members.base
    return members


def compaction_due(snapshot: ValueSetSnapshot) -> bool:
    """Whether the snapshot's layers have grown enough to rebuild its base (in the background)."""
    members = snapshot.members
    return isinstance(members, OverlaySet) and _layered_values(members) > _due_at(base_members(snapshot))


def _due_at(base: Set[str]) -> int:
    return max(COMPACT_MIN, len(base) // COMPACT_RATIO)


def _layered(
    index: Mapping[str, str],
    apply: Callable[[str], str],
    members: OverlaySet,
    gained: list[str],
    lost: list[str],
    on_top: bool = False,
) -> OverlayIndex:
    """The base of `index` (unwrapping its top layer, unless a layer goes `on_top` of it) with the members'
    removals, and the layer's index of additions changed by this delta's: a C-level copy of the top layer
    (FOLD_AT values and one delta at most) and O(delta) normalisations, not one per value every layer holds."""
    if isinstance(index, OverlayIndex) and not on_top:
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
