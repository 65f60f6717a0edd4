"""argwatch.sources in proportion to the change: sharded members, add/remove/retire as deltas, snapshots made part by
part from a frozen version."""

from __future__ import annotations

from collections.abc import Callable, Set

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.sources import ValueSetCatalog
from argwatch.sources import _sharded_members as sharded
from argwatch.sources import _value_sets as value_sets
from argwatch.sources._sharded_members import ShardedMembers
from argwatch.v1 import sources_pb2

VALUES = st.text(alphabet="abcdef", min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    start=st.frozensets(VALUES, max_size=40),
    steps=st.lists(st.tuples(st.frozensets(VALUES, max_size=12), st.frozensets(VALUES, max_size=12)), max_size=8),
    cut_above=st.sampled_from([0, 3, 20, 4096]),
)
def test_sharded_members_are_the_set_a_frozenset_would_be_after_every_change(
    start: frozenset[str], steps: list[tuple[frozenset[str], frozenset[str]]], cut_above: int
) -> None:
    original = sharded.SHARD_ABOVE
    sharded.SHARD_ABOVE = cut_above  # cut small sets too, and sets that grow past the bound mid-way
    try:
        model, members = start, ShardedMembers(start)
        versions = [(members, model)]
        for added, removed in steps:
            model = (model - removed) | added
            members = members.changed(added, removed)
            versions.append((members, model))
        for version, expected in versions:  # every version is still what it was when it was made
            assert set(version) == expected and len(version) == len(expected)
            assert all(value in version for value in expected)
            assert not any(value in version for value in ("zz", "", "abcdefg") if value not in expected)
            assert sorted(version.minus(ShardedMembers(start))) == sorted(expected - start)
            view: Set[str] = version  # compared as any read-only set is
            assert view == expected and (version | {"q"}) == expected | {"q"}
    finally:
        sharded.SHARD_ABOVE = original


def test_a_large_set_changes_by_copying_only_the_shards_a_change_touches() -> None:
    members = ShardedMembers(f"m-{i}" for i in range(20_000))
    following = members.changed(["new"], ["m-7"])
    kept = sum(1 for mine, theirs in zip(members._shards, following._shards, strict=True) if mine is theirs)
    assert kept >= sharded.SHARDS - 2 and len(following) == 20_000
    assert "new" in following and "m-7" not in following and "m-7" in members and "new" not in members


def deltas(queue: object) -> list[sources_pb2.ValueSetDelta]:
    found = []
    while not queue.empty():  # type: ignore[attr-defined]
        announced = queue.get_nowait()  # type: ignore[attr-defined]
        assert isinstance(announced, sources_pb2.WatchValueSetsResponse)
        found.append(announced.delta)
    return found


def test_add_remove_and_retire_are_each_one_delta_of_what_changed() -> None:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "OTHER", "LATE"])
    queue = catalog.subscribe()

    added = catalog.add("refunds.reason_codes", ["WRONG_ITEM", "OTHER", "WRONG_ITEM"])
    removed = catalog.remove("refunds.reason_codes", ["LATE", "NEVER_A_MEMBER"], replaced_by={"LATE": "OTHER"})
    retired = catalog.retire("refunds.reason_codes", ["CUSTOMER_UNHAPPY", "DAMAGED_ITEM"], replaced_by={"X": "OTHER"})
    back = catalog.add("refunds.reason_codes", ["LATE"])

    assert [published.version for published in (added, removed, retired, back)] == [2, 3, 4, 5]
    first, second, third, fourth = deltas(queue)
    assert (first.from_version, first.to_version, list(first.added), list(first.removed)) == (1, 2, ["WRONG_ITEM"], [])
    assert (list(second.removed), dict(second.replaced_by)) == (["LATE"], {"LATE": "OTHER"})
    assert (list(third.removed), dict(third.replaced_by)) == (["CUSTOMER_UNHAPPY", "DAMAGED_ITEM", "X"], {"X": "OTHER"})
    assert (list(fourth.added), list(fourth.removed)) == (["LATE"], [])
    assert all(delta.incarnation == catalog.incarnation for delta in (first, second, third, fourth))
    assert set(back.members) == {"OTHER", "WRONG_ITEM", "LATE"}
    assert set(back.retired) == {"CUSTOMER_UNHAPPY", "DAMAGED_ITEM", "X"}
    assert dict(back.replaced_by) == {"X": "OTHER"}  # LATE is a member again: its replacement is gone
    # Each version stays what it was.
    assert set(removed.members) == {"DAMAGED_ITEM", "OTHER", "WRONG_ITEM"} and dict(removed.replaced_by) == {
        "LATE": "OTHER"
    }


def test_a_change_that_changes_nothing_is_no_new_version_and_no_delta() -> None:
    catalog = ValueSetCatalog()
    first = catalog.publish("s", ["A"], ["OLD"])
    queue = catalog.subscribe()
    assert catalog.add("s", ["A"]) is first
    assert catalog.remove("s", ["B"]) is first
    assert catalog.retire("s", ["OLD"]) is first
    assert catalog.publish("s", ["A"]) is first
    assert deltas(queue) == []


def test_a_whole_publish_retires_what_it_drops_and_keeps_members_out_of_the_retired() -> None:
    catalog = ValueSetCatalog()
    catalog.publish("s", ["A", "B"], replaced_by={"A": "B"})  # a member named as replaced is not retired
    queue = catalog.subscribe()
    published = catalog.publish("s", ["B", "C"], replaced_by={"A": "C", "B": "C"})
    (delta,) = deltas(queue)
    assert (list(delta.added), list(delta.removed), dict(delta.replaced_by)) == (["C"], ["A"], {"A": "C"})
    assert set(published.retired) == {"A"} and dict(published.replaced_by) == {"A": "C"}


def test_a_set_must_exist_to_lose_members_and_keeps_its_kind() -> None:
    catalog = ValueSetCatalog()
    with pytest.raises(ValueError, match="never published"):
        catalog.remove("s", ["A"])
    with pytest.raises(ValueError, match="never published"):
        catalog.retire("s", ["A"])
    assert catalog.add("s", ["A"]).version == 1  # adding to a new set publishes it
    catalog.publish("scoped", members_by_scope={"cus_a": ["pm_1"]})
    with pytest.raises(ValueError, match="per scope"):
        catalog.add("scoped", ["pm_2"])


def test_a_snapshot_is_made_part_by_part_from_the_version_taken_even_as_the_set_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(value_sets, "PART_MEMBERS", 100)
    monkeypatch.setattr(value_sets, "SORT_UP_TO", 50)
    catalog = ValueSetCatalog()
    taken = catalog.publish("s", [f"m-{i:04d}" for i in range(450)], ["OLD"], replaced_by={"GONE": "m-0001"})
    parts = value_sets.snapshot_messages(taken)
    first = next(parts)
    catalog.remove("s", [f"m-{i:04d}" for i in range(200)])  # the catalog moves on while the stream sends
    catalog.add("s", ["late"])
    rest = list(parts)
    snapshots = [message.snapshot for message in (first, *rest)]
    assert [(s.part, s.parts, s.version) for s in snapshots] == [(i, 5, 1) for i in range(5)]
    members = [member for s in snapshots for member in s.members]
    assert sorted(members) == sorted(taken.members) and len(members) == 450
    assert set(snapshots[0].retired) == {"OLD", "GONE"} and snapshots[0].HasField("updated_at")
    assert [(v.value, v.replaced_by) for v in snapshots[0].retired_values] == [("GONE", "m-0001")]
    assert not any(s.retired or s.HasField("updated_at") for s in snapshots[1:])


def test_a_value_no_gateway_would_take_is_refused_at_the_owner_and_changes_nothing() -> None:
    catalog = ValueSetCatalog()
    first = catalog.publish("s", ["A"])
    queue = catalog.subscribe()
    long = "x" * 1025
    attempts: list[Callable[[], object]] = [
        lambda: catalog.add("s", [long]),
        lambda: catalog.retire("s", [long]),
        lambda: catalog.remove("s", ["A"], replaced_by={"A": long}),
        lambda: catalog.publish("s", ["A", long]),
        lambda: catalog.publish("scoped", members_by_scope={"cus_a": [long]}),
    ]
    for attempt in attempts:
        with pytest.raises(ValueError, match="longer than 1024"):
            attempt()
    assert catalog.get("s") is first and catalog.get("scoped") is None and deltas(queue) == []
    assert catalog.add("s", ["y" * 1024]).version == 2  # the longest a gateway takes
