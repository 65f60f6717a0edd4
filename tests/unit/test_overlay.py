"""Deltas on large sets: layered over the previous tables, costing the delta, not the set."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Set
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.sets import overlay
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.overlay import (
    COMPACT_MIN,
    HARD_FACTOR,
    OverlaySet,
    base_members,
    compaction_due,
    with_delta,
)
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate
from argwatch.server.sets.scoped import scope_key, split_key, within_scope
from argwatch.server.sets.updates import apply_delta
from tests.snapshots import make_snapshot

_loose = within_scope(normaliser(LOOSE))

SIZE = PACK_ABOVE + 1000


@pytest.fixture(scope="module")
def large():
    return make_snapshot("big", 1, [f"handle_{i:06d}" for i in range(SIZE)], received_at=0.0)


def delta(from_version: int, added=(), removed=(), replaced=None) -> DeltaUpdate:
    return DeltaUpdate(
        "big", from_version, from_version + 1, tuple(added), tuple(removed), MappingProxyType(replaced or {})
    )


class CountingSet(Set[str]):
    """The real set, counting full passes over it."""

    def __init__(self, inner: Set[str]) -> None:
        self.inner, self.passes = inner, 0

    def __contains__(self, value: object) -> bool:
        return value in self.inner

    def __iter__(self) -> Iterator[str]:
        self.passes += 1
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class CountingIndex(Mapping[str, str]):
    def __init__(self, inner: Mapping[str, str]) -> None:
        self.inner, self.passes = inner, 0

    def get(self, key, default=None):
        return self.inner.get(key, default)

    def __getitem__(self, key: str) -> str:
        return self.inner[key]

    def __iter__(self) -> Iterator[str]:
        self.passes += 1
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def test_a_delta_is_layered_without_a_pass_over_the_set(large) -> None:
    members, index = CountingSet(large.members), CountingIndex(large.loose_index)
    watched = dataclasses.replace(large, members=members, loose_index=index)
    after = with_delta(
        watched,
        delta(1, added=["Handle-New"], removed=["handle_000007"], replaced={"handle_000007": "Handle-New"}),
        now=50.0,
        rules=(),
    )
    assert after is not None and (members.passes, index.passes) == (0, 0)
    assert after.version == 2 and after.size == SIZE
    assert "Handle-New" in after.members and "handle_000007" not in after.members
    assert "handle_000008" in after.members
    assert after.loose_index.get("handle-new") == "Handle-New"  # the added value's slips are found
    assert after.loose_index.get("handle-000007") is None
    assert after.retirements["handle_000007"] == (50.0, "Handle-New")


def test_layers_stack_and_undo_each_other(large) -> None:
    v2 = with_delta(large, delta(1, added=["X"], removed=["handle_000001"]), now=1.0, rules=())
    assert v2 is not None
    v3 = with_delta(v2, delta(2, added=["handle_000001"], removed=["X"]), now=2.0, rules=())
    assert v3 is not None and isinstance(v3.members, OverlaySet)
    assert v3.size == SIZE and "X" not in v3.members and "handle_000001" in v3.members  # back to the base
    assert base_members(v3) is large.members  # shared, never copied


def test_layers_past_the_due_size_ask_for_a_compaction_and_past_the_hard_bound_for_a_rebuild(large) -> None:
    due = with_delta(large, delta(1, added=[f"new_{i}" for i in range(COMPACT_MIN + 1)]), now=0.0, rules=())
    assert due is not None and compaction_due(due)
    below = with_delta(large, delta(1, added=[f"new_{i}" for i in range(COMPACT_MIN)]), now=0.0, rules=())
    assert below is not None and not compaction_due(below) and not compaction_due(large)
    many = [f"new_{i}" for i in range(HARD_FACTOR * COMPACT_MIN + 1)]
    assert with_delta(large, delta(1, added=many), now=0.0, rules=()) is None


def test_a_delta_past_the_hard_bound_hands_the_layers_on_unread(large) -> None:
    """The rebuild past the hard bound reads the members a chunk at a time while it indexes them: the payload
    holds the layers and the delta's new values, not a copy made in one pass on the loop, and what it builds
    is exactly the owner's set."""
    layered = with_delta(
        large, delta(1, added=["first", "handle_000002"], removed=["handle_000001"]), now=0.0, rules=()
    )
    assert layered is not None and isinstance(layered.members, OverlaySet)
    counted = CountingSet(layered.members)  # the same layers, counting full passes over them
    over = dataclasses.replace(layered, members=OverlaySet(counted, frozenset(), frozenset()))
    many = [f"new_{i}" for i in range(HARD_FACTOR * COMPACT_MIN + 1)]
    past = delta(2, added=[*many, "first", many[0]], removed=["handle_000003", "handle_000002"])
    assert with_delta(layered, past, now=1.0, rules=()) is None
    payload = apply_delta(over, past, now=1.0)
    assert counted.passes == 0  # not read: handed on
    assert isinstance(payload.members, OverlaySet) and payload.members.base is over.members
    rebuilt = make_snapshot("big", 3, payload.members, received_at=1.0, excluded=payload.excluded)
    owners = (set(large.members) | {"first", *many}) - {"handle_000001", "handle_000002", "handle_000003"}
    assert set(rebuilt.members) == owners and rebuilt.size == len(owners)


def test_small_sets_are_rebuilt_not_layered() -> None:
    small = make_snapshot("s", 1, ["A", "B"], received_at=0.0)
    assert with_delta(small, DeltaUpdate("s", 1, 2, ("C",), (), MappingProxyType({})), now=0.0, rules=()) is None


def test_layered_indexes_after_many_deltas_find_what_a_rebuild_finds(large) -> None:
    """Each delta changes the previous layer's index by its own values only: after adds, removals of added and
    of base members, and re-adds, every member's loose form finds it and no gone value's does."""
    snapshot, version, model = large, 1, set(large.members)
    steps = [
        (["Added-A", "Added-B", "Added-C"], []),
        (["Added-D"], ["Added-B", "handle_000003"]),
        (["Added-B", "handle_000003"], ["Added-A", "handle_000004"]),
        ([], ["Added-D", "Added-C"]),
        (["Added-E"], []),
    ]
    for added, removed in steps:
        layered = with_delta(snapshot, delta(version, added, removed), now=float(version), rules=())
        assert layered is not None
        snapshot, version = layered, version + 1
        model = (model - set(removed)) | set(added)
    assert set(snapshot.members) == model
    for member in ("Added-B", "Added-E", "handle_000003", "handle_000005"):
        assert snapshot.loose_index.get(member.lower().replace("_", "-")) == member
    for gone in ("Added-A", "Added-C", "Added-D", "handle_000004"):
        assert snapshot.loose_index.get(gone.lower().replace("_", "-")) is None


# A few values, some sharing a loose form, so that deltas add, remove, re-add and collide.
POOL = ["Ab", "ab", "A-b", "c", "C", "d", "e_f", "E-F", "g", "h", "i"]


def _scope_of(value: str) -> str:
    return "cus_1" if len(value) % 2 else "cus_2"


@settings(max_examples=200, deadline=None)
@given(
    start=st.lists(st.sampled_from(POOL), unique=True, min_size=1, max_size=6),
    steps=st.lists(
        st.tuples(st.lists(st.sampled_from(POOL), max_size=3), st.lists(st.sampled_from(POOL), max_size=3)),
        max_size=30,
    ),
    fold_at=st.sampled_from([0, 2, 512]),
    scoped=st.booleans(),
)
def test_layers_on_layers_read_as_the_set_they_stand_for(start, steps, fold_at, scoped) -> None:
    """Whatever run of deltas, with the top level folding into the one below at any size: the members are
    the model's, each member is found by its loose form and by its scope's listing, and the levels stay two."""
    # Two scopes, so a delta can empty one while the other stays.
    key = (lambda value: scope_key(_scope_of(value), value)) if scoped else (lambda value: value)
    snapshot = make_snapshot("s", 1, [key(value) for value in start], received_at=0.0, scoped=scoped)
    model = {key(value) for value in start}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(overlay, "FOLD_AT", fold_at)
        for version, (added, removed) in enumerate(steps, start=1):
            change = DeltaUpdate(
                "s",
                version,
                version + 1,
                tuple(map(key, added)),
                tuple(map(key, removed)),
                MappingProxyType({}),
                scoped=scoped,
            )
            layered = with_delta(snapshot, change, now=float(version), rules=(), min_base=0)
            assert layered is not None
            snapshot = layered
            model = (model - set(change.removed)) | set(change.added)
            assert set(snapshot.members) == model and snapshot.size == len(model)
            assert all(value in snapshot.members for value in model)
            assert not any(key(value) in snapshot.members for value in POOL if key(value) not in model)
            levels, members = 0, snapshot.members
            while isinstance(members, OverlaySet):
                levels, members = levels + 1, members.base
            assert levels <= 2
            for member in model:
                # Found by its own loose form (another member of the same form may be the one found).
                found = snapshot.loose_index.get(_loose(member))
                assert found is None or found in model
                if sum(1 for value in POOL if _loose(key(value)) == _loose(member)) == 1:
                    assert found == member  # a form only it has: always found
            if scoped:
                for scope in ("cus_1", "cus_2"):
                    listed = sorted(v for v in POOL if key(v) in model and _scope_of(v) == scope)
                    assert sorted(snapshot.within(scope).members) == listed
                # The listing whole, as an export reads it: a scope the deltas emptied is gone, as in a rebuild.
                whole = {scope: set(keys) for scope, keys in snapshot.by_scope.items()}
                assert whole == {
                    s: {k for k in model if split_key(k)[0] == s} for s in {split_key(k)[0] for k in model}
                }
