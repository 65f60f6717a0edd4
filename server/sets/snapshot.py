"""An immutable, versioned copy of one value set, with the indexes the checker needs, built in bounded steps.

A set may have a million members. Everything here is built in chunks of
CHUNK members (`make_snapshot_async` yields to the event loop between chunks,
so calls keep being served while a large set is applied), in the order the
source sent the members, and without sorting large sets: sorting a million
strings is one long C call that no thread can interleave with.

Larger chunks are worse than they look: a callback that becomes ready during a
chunk runs only after the next one, so what waits is about two chunks, not one.
Each chunk costs a loop turn. docs/performance.md has the stalls measured per
chunk size, and why CHUNK is what it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from itertools import islice
from types import MappingProxyType
from typing import NamedTuple, cast

from argwatch.server.policy.model import Normalisation
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.packed import PACK_ABOVE, PackedForms, PackedHolders, PackedListing, PackedMembers
from argwatch.server.sets.payload import Retirement
from argwatch.server.sets.retired import (
    CHUNK,
    KEEP_ALL,
    MAX_VALUE_CHARS,
    LayeredHistory,
    RetiredHistory,
    RetiredKeep,
    ValueTooLong,
    history_steps,
    layered_history_steps,
)
from argwatch.server.sets.scoped import ScopeListing, ScopeMembers, scope_key, split_key, value_of, within_scope

# Sets up to this size keep a sorted list (they can be listed whole in repair messages).
SORT_UP_TO = 10_000
_NOTHING: Mapping[str, str] = MappingProxyType({})
_NO_SCOPES: Mapping[str, Sequence[str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, eq=False)
class ValueSetSnapshot:
    """One version of a value set, as fetched from its source. Never mutated.

    Compared by identity (eq=False): field-wise equality would compare whole
    member sets; versions are compared explicitly where it matters.
    """

    name: str
    version: int
    # Built in chunks and never mutated after: a set, or for very large sets PackedMembers
    # (see packed.py); a frozenset copy would be one more long C call.
    members: Set[str]
    # All members sorted, for sets of up to SORT_UP_TO members; empty for larger sets.
    sorted_members: tuple[str, ...]
    # The retired values kept: a frozenset for a small set, the layered history itself for a large one (retired.py).
    retired: Collection[str]
    # Every retired value kept, in the order it was retired (the oldest first): when, where the source said,
    # and by what it was replaced. At most the policy's retired_keep (retired.py); never changed once here.
    # A large set's is layered (LayeredHistory): built so, and each delta layers over the one before.
    retirements: RetiredHistory | LayeredHistory
    # Wall-clock time (epoch seconds) at which this version arrived. When the source
    # last *confirmed* it is the provider's business (heartbeats confirm without a new snapshot).
    received_at: float
    # loose form (case, separators, blanks) -> legal member: shape classification and,
    # for arguments using the default normalisation, in_set_normalised.
    loose_index: Mapping[str, str]
    # normalised form -> legal member, for each other normalisation the policy binds to this set.
    by_rule: Mapping[Normalisation, Mapping[str, str]]
    loose_retired: Collection[str]
    # A set scoped by a session field (scoped.py): members, retired values and every index are keyed by
    # scope + NUL + value, and normalised within the scope only.
    scoped: bool = False
    # Scoped sets only: scope -> its member keys (what repair lists), and value -> a key holding it (what tells
    # another scope's member from an invented value, for the counts only).
    by_scope: Mapping[str, Sequence[str]] = field(default_factory=lambda: _NO_SCOPES)
    holders: Mapping[str, str] = field(default_factory=lambda: _NOTHING)

    @property
    def size(self) -> int:
        return len(self.members)

    def index_for(self, rule: Normalisation) -> Mapping[str, str]:
        """The index for `rule`, built now if the policy did not announce it (rare: costs O(n))."""
        if rule == LOOSE:
            return self.loose_index
        index = self.by_rule.get(rule)
        if index is None:
            apply = _applier(rule, self.scoped)
            index = {}
            for member in self.members:
                index.setdefault(apply(member), member)
        return index

    def within(self, scope: str) -> ValueSetSnapshot:
        """The part of a scoped set one scope may be shown, as plain values: its members and its retired
        history (what repair lists and names), and no index. A global set is itself."""
        if not self.scoped:
            return self
        members = ScopeMembers(scope, self.by_scope.get(scope, ()), self.members)
        history = RetiredHistory(
            (value, info)
            for key, info in self.retirements.items()
            if (split := split_key(key))[0] == scope and (value := split[1])
        )
        return ValueSetSnapshot(
            name=self.name,
            version=self.version,
            members=members,
            sorted_members=tuple(sorted(members)) if len(members) <= SORT_UP_TO else (),
            retired=frozenset(history),
            retirements=history,
            received_at=self.received_at,
            loose_index=_NOTHING,
            by_rule=MappingProxyType({}),
            loose_retired=frozenset(),
        )


def member_key(snapshot: ValueSetSnapshot, value: str, scope: str) -> str:
    """What `value`, sent by a call in `scope`, is looked up as in `snapshot`."""
    return scope_key(scope, value) if snapshot.scoped else value


def _applier(rule: Normalisation, scoped: bool) -> Callable[[str], str]:
    apply = normaliser(rule)
    return within_scope(apply) if scoped else apply


# What a builder's step yields: None (a chunk done: let the loop run), or work to run off the loop, whose
# result is sent back into the builder.
Step = Callable[[], object] | None
# A background build's chunk (a compaction): it rests as long as each chunk took, so a smaller chunk costs it
# no time in all, and each loop turn it holds is shorter.
BACKGROUND_CHUNK = CHUNK // 2


class SetReading(NamedTuple):
    """A set as the checker may use it now: its snapshot, when its source last confirmed it, and whether stale."""

    snapshot: ValueSetSnapshot
    confirmed_at: float  # epoch seconds
    stale: bool


async def make_snapshot_async(
    name: str,
    version: int,
    members: Sequence[str] | Set[str],
    retired: Iterable[str] = (),
    *,
    received_at: float,
    rules: Iterable[Normalisation] = (),
    retirements: Mapping[str, Retirement] | None = None,
    excluded: Set[str] = frozenset(),
    keep: RetiredKeep = KEEP_ALL,
    scoped: bool = False,
    background: bool = False,
) -> ValueSetSnapshot:
    """Builds a snapshot CHUNK members (and retired values) at a time, letting the event loop run between.
    `scoped`: the members are scope keys (scoped.py); a key with no usable scope raises MalformedScope.
    `background`: after each chunk, rest as long as it took, so that the loop is idle half the time. A chunk
    between every two loop turns taxes each turn, and a message on a stream takes several turns to arrive: a
    compaction that only yielded slowed a large set's deltas below their owner's rate. Its chunks are
    BACKGROUND_CHUNK members: the loop waits half as long for each, and resting as long as each took, the
    build takes as long in all."""
    steps = snapshot_steps(
        name,
        version,
        members,
        retired,
        received_at,
        rules,
        retirements,
        excluded,
        keep,
        scoped,
        chunk=BACKGROUND_CHUNK if background else CHUNK,
    )
    clock = time.perf_counter
    made: object = None
    while True:
        started = clock()
        try:
            step = steps.send(made)
        except StopIteration as built:
            return built.value  # type: ignore[no-any-return]
        made = None
        if step is not None:  # work that needs no GIL for most of it: a large set's tables, made and touched
            made = await asyncio.to_thread(step)
            continue
        await asyncio.sleep(clock() - started if background else 0)


def _read_only(index: dict[str, str] | PackedForms) -> Mapping[str, str]:
    return index if isinstance(index, PackedForms) else MappingProxyType(index)


def snapshot_steps(
    name: str,
    version: int,
    members: Sequence[str] | Set[str],
    retired: Iterable[str],
    received_at: float,
    rules: Iterable[Normalisation],
    retirements: Mapping[str, Retirement] | None,
    excluded: Set[str],
    keep: RetiredKeep,
    scoped: bool = False,
    chunk: int = CHUNK,
) -> Generator[Step, object, ValueSetSnapshot]:
    """The builder, `chunk` members a step: make_snapshot_async lets the event loop run between steps. A step may
    instead yield a function to be run off the loop, and is sent what it returns (tests/snapshots.py runs it
    in place)."""
    other_rules = [rule for rule in dict.fromkeys(rules) if rule != LOOSE]
    if len(members) > PACK_ABOVE:
        return (
            yield from _build_large(
                name, version, members, retired, received_at, other_rules, retirements, excluded, keep, scoped, chunk
            )
        )
    scopes = _Scopes() if scoped else None
    loose = _applier(LOOSE, scoped)
    member_set: set[str] = set()
    loose_index: dict[str, str] = {}
    rule_indexes: dict[Normalisation, dict[str, str]] = {rule: {} for rule in other_rules}
    appliers = [(_applier(rule, scoped), rule_indexes[rule]) for rule in other_rules]
    for part in _chunks(name, members, excluded, chunk):
        if scopes is not None:
            scopes.add(part)
        member_set.update(part)
        for member in part:
            # The first member in the source's order wins a collision: deterministic for a given source.
            loose_index.setdefault(loose(member), member)
            for apply, index in appliers:
                index.setdefault(apply(member), member)
        yield None
    history = yield from history_steps(name, member_set, retired, retirements or {}, keep)
    built = _snapshot(name, version, member_set, history, received_at, loose_index, rule_indexes)
    return (yield from scopes.finish(built)) if scopes is not None else built


def _build_large(
    name: str,
    version: int,
    members: Sequence[str] | Set[str],
    retired: Iterable[str],
    received_at: float,
    other_rules: list[Normalisation],
    retirements: Mapping[str, Retirement] | None,
    excluded: Set[str],
    keep: RetiredKeep,
    scoped: bool,
    chunk: int = CHUNK,
) -> Generator[Step, object, ValueSetSnapshot]:
    """Packed members and indexes (packed.py): no Python object a member, and about 17 bytes a member over the
    members' UTF-8 (27 for a scoped set, with its scope lists and value index). Their tables are made in a
    worker thread: every page of them is touched as they are made, without the GIL (_packed.c)."""
    size = len(members)

    def allocate() -> tuple[PackedMembers, PackedForms, dict[Normalisation, PackedForms]]:
        member_set = PackedMembers(size, scoped)
        loose_index = PackedForms(_applier(LOOSE, scoped), member_set, size)
        return (
            member_set,
            loose_index,
            {rule: PackedForms(_applier(rule, scoped), member_set, size) for rule in other_rules},
        )

    made = yield allocate
    member_set, loose_index, rule_indexes = cast(
        tuple[PackedMembers, PackedForms, dict[Normalisation, PackedForms]], made
    )
    indexes = [loose_index, *rule_indexes.values()]
    for part in _chunks(name, members, excluded, chunk):
        added = member_set.add_chunk(part)  # a scoped chunk naming no usable scope raises MalformedScope
        for index in indexes:
            index.add_range(added.start, added.stop)
        yield None
    member_set.shrink()
    # Layered as it is built: its deltas layer over it (overlay.py), and none must pay O(history) to do so.
    history = yield from layered_history_steps(name, member_set, retired, retirements or {}, keep)
    built = _snapshot(name, version, member_set, history, received_at, loose_index, rule_indexes)
    if not scoped:
        return built
    return replace(built, scoped=True, by_scope=PackedListing(member_set), holders=PackedHolders(member_set))


class _Scopes:
    """What a small scoped set holds beyond a global one, built alongside it: the listing and the value index."""

    def __init__(self) -> None:
        self.listing = ScopeListing()
        self.holders: dict[str, str] = {}  # value -> the first key (in source order) holding it

    def add(self, chunk: list[str]) -> None:
        """Lists and indexes a chunk of keys."""
        self.listing.add_all(chunk)  # raises MalformedScope before anything of the chunk is indexed
        holders = self.holders
        for key in chunk:
            holders.setdefault(value_of(key), key)

    def finish(self, built: ValueSetSnapshot) -> Generator[None, None, ValueSetSnapshot]:
        yield from self.listing.freeze_steps()
        return replace(
            built,
            sorted_members=(),
            scoped=True,
            by_scope=self.listing.mapping(),
            holders=MappingProxyType(self.holders),
        )


def _chunks(name: str, members: Sequence[str] | Set[str], excluded: Set[str], size: int) -> Iterator[list[str]]:
    """The members `size` at a time, as str, without the excluded ones; refuses an over-long member."""
    if isinstance(members, Set):  # a frozen set (a layered version being compacted): read in turn, never copied
        values = iter(members)
        slices: Iterator[list[str]] = iter(lambda: list(islice(values, size)), [])
    else:
        # Slicing also converts a protobuf repeated field to str objects a chunk at a time.
        slices = (list(members[start : start + size]) for start in range(0, len(members), size))
    for chunk in slices:
        if excluded:
            chunk = [member for member in chunk if member not in excluded]
        if max(map(len, chunk), default=0) > MAX_VALUE_CHARS:
            raise ValueTooLong(f"{name}: a member is longer than {MAX_VALUE_CHARS} characters")
        yield chunk


def _snapshot(
    name: str,
    version: int,
    member_set: Set[str],
    history: RetiredHistory | LayeredHistory,
    received_at: float,
    loose_index: dict[str, str] | PackedForms,
    rule_indexes: Mapping[Normalisation, dict[str, str] | PackedForms],
) -> ValueSetSnapshot:
    return ValueSetSnapshot(
        name=name,
        version=version,
        members=member_set,
        sorted_members=tuple(sorted(member_set)) if len(member_set) <= SORT_UP_TO else (),
        # At most retired_keep values, and no Python call each; a layered history reads as its own set.
        retired=history if isinstance(history, LayeredHistory) else frozenset(history),
        retirements=history,
        received_at=received_at,
        loose_index=_read_only(loose_index),
        by_rule=MappingProxyType({rule: _read_only(index) for rule, index in rule_indexes.items()}),
        loose_retired=history.loose_forms(),
    )
