"""Update rules: what a snapshot, delta or heartbeat does to a set, and the reconnect backoff."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from argwatch.common.backoff import backoff_delay
from argwatch.server.sets.payload import DeltaUpdate, SetPayload
from argwatch.server.sets.scoped import scope_key
from argwatch.server.sets.updates import UpdateAction, apply_delta, judge_delta, judge_heartbeat, judge_snapshot
from tests.snapshots import make_snapshot

CURRENT = make_snapshot("s", 5, ["A", "B"], ["Z"], received_at=0.0)


def delta(from_version: int, to_version: int, added=(), removed=(), name: str = "s", replaced=None) -> DeltaUpdate:
    return DeltaUpdate(name, from_version, to_version, tuple(added), tuple(removed), MappingProxyType(replaced or {}))


@pytest.mark.parametrize(
    ("payload", "action", "reason"),
    [
        (SetPayload("s", 6, ("A",)), UpdateAction.APPLY, ""),
        (SetPayload("s", 5, ("A", "B")), UpdateAction.APPLY, ""),  # the same version: a confirmation
        (SetPayload("s", 4, ("A",)), UpdateAction.REJECT, "version_order"),
        (SetPayload("", 6, ("A",)), UpdateAction.REJECT, "empty_name"),
        (SetPayload("s", 6, ("A", "B", "C", "D")), UpdateAction.REJECT, "oversized"),
    ],
)
def test_snapshots_are_judged(payload: SetPayload, action: UpdateAction, reason: str) -> None:
    assert judge_snapshot(payload, CURRENT, max_members=3) == (action, reason)


@pytest.mark.parametrize(
    ("update", "current", "action", "reason"),
    [
        (delta(5, 6, added=["C"]), CURRENT, UpdateAction.APPLY, ""),
        (delta(7, 8, added=["C"]), CURRENT, UpdateAction.RESYNC, "version_gap"),
        (delta(5, 6, added=["C"]), None, UpdateAction.RESYNC, "unknown_base"),
        (delta(4, 5, added=["C"]), CURRENT, UpdateAction.IGNORE, ""),
        (delta(5, 5, added=["C"]), CURRENT, UpdateAction.REJECT, "version_order"),
        (delta(5, 6, added=["C"], name=""), CURRENT, UpdateAction.REJECT, "empty_name"),
        (delta(5, 6, added=["C", "D"]), CURRENT, UpdateAction.REJECT, "oversized"),
        # A removal repeated is one removal: it makes room for one addition, not three.
        (delta(5, 6, added=["C", "D", "E"], removed=["A", "A", "A"]), CURRENT, UpdateAction.REJECT, "oversized"),
        (delta(5, 6, added=["C", "D"], removed=["A", "A"]), CURRENT, UpdateAction.APPLY, ""),
        # A value the owner retires without its being a member is kept in the history: bounded like one.
        (delta(5, 6, removed=["x" * 1025]), CURRENT, UpdateAction.REJECT, "value_too_long"),
    ],
)
def test_deltas_are_judged(update: DeltaUpdate, current, action: UpdateAction, reason: str) -> None:
    assert judge_delta(update, current, max_members=3) == (action, reason)


def test_heartbeats_confirm_resync_or_are_rejected() -> None:
    assert judge_heartbeat(5, CURRENT).action is UpdateAction.APPLY
    assert judge_heartbeat(6, CURRENT) == (UpdateAction.RESYNC, "behind")
    assert judge_heartbeat(4, CURRENT) == (UpdateAction.REJECT, "version_order")
    assert judge_heartbeat(1, None).action is UpdateAction.RESYNC


def test_a_delta_retires_what_it_removes_with_when_and_the_replacement() -> None:
    payload = apply_delta(CURRENT, delta(5, 6, added=["C"], removed=["B"], replaced={"B": "C"}), now=1234.0)
    # The history in the order values were retired, the newest last (what retired_keep cuts from the front).
    assert (payload.version, list(payload.retirements)) == (6, ["Z", "B"])
    assert payload.retirements["B"] == (1234.0, "C")
    # The removal is applied while indexing, a chunk at a time.
    snapshot = make_snapshot(
        "s", 6, payload.members, retirements=payload.retirements, received_at=0.0, excluded=payload.excluded
    )
    assert set(snapshot.members) == {"A", "C"} and snapshot.retired == {"Z", "B"}
    assert snapshot.loose_index == {"a": "A", "c": "C"}


def test_a_value_a_delta_lists_twice_is_added_once_and_a_scope_lists_it_once() -> None:
    current = make_snapshot("s", 1, [scope_key("cus_1", "a")], received_at=0.0, scoped=True)
    twice = DeltaUpdate(
        "s", 1, 2, (scope_key("cus_1", "b"), scope_key("cus_1", "b")), (), MappingProxyType({}), scoped=True
    )
    payload = apply_delta(current, twice, now=1.0)
    snapshot = make_snapshot("s", 2, payload.members, received_at=1.0, scoped=True)
    assert sorted(snapshot.within("cus_1").members) == ["a", "b"]
    assert len(snapshot.by_scope["cus_1"]) == 2


def test_backoff_grows_to_the_cap_with_full_jitter() -> None:
    assert [backoff_delay(n, base=0.2, cap=1.0, rng=lambda: 1.0) for n in (1, 2, 3, 4, 5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_delay(3, rng=lambda: 0.0) == 0.0


def test_a_member_longer_than_the_limit_fails_the_whole_build() -> None:
    from argwatch.server.sets.retired import ValueTooLong

    with pytest.raises(ValueTooLong):
        make_snapshot("s", 6, ["A", "x" * 2000], received_at=0.0)
