"""Scoped sets' copies: one scope's members never found, normalised, listed or retired from another scope."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from argwatch.server.policy.model import CaseRule, Normalisation
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.overlay import OverlaySet, with_delta
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate, Retirement
from argwatch.server.sets.scoped import MalformedScope, scope_key, within_scope
from argwatch.server.sets.snapshot import member_key
from argwatch.server.sets.updates import UpdateAction, apply_delta, judge_delta
from tests.snapshots import make_snapshot

_loose = within_scope(normaliser(LOOSE))


def keyed(members: dict[str, list[str]]) -> list[str]:
    return [scope_key(scope, value) for scope, values in members.items() for value in values]


def scoped_snapshot(
    members: dict[str, list[str]],
    rules: tuple[Normalisation, ...] = (),
    retirements: dict[str, Retirement] | None = None,
):
    return make_snapshot(
        "billing.payment_methods",
        1,
        keyed(members),
        received_at=0.0,
        scoped=True,
        rules=rules,
        retirements=retirements,
    )


def test_a_value_is_a_member_of_its_own_scope_only() -> None:
    snapshot = scoped_snapshot({"cus_a": ["pm_1", "pm_2"], "cus_b": ["pm_3"]})
    assert snapshot.scoped and snapshot.size == 3
    assert member_key(snapshot, "pm_1", "cus_a") in snapshot.members
    assert member_key(snapshot, "pm_3", "cus_a") not in snapshot.members
    assert "pm_3" not in snapshot.members  # a bare value is no member of a scoped set
    assert snapshot.sorted_members == ()  # nothing lists the whole of a scoped set


def test_each_scope_lists_its_own_keys_and_the_value_index_finds_another_scopes_holder() -> None:
    snapshot = scoped_snapshot({"cus_a": ["pm_1", "pm_2"], "cus_b": ["pm_3"]})
    assert list(snapshot.by_scope["cus_a"]) == [scope_key("cus_a", "pm_1"), scope_key("cus_a", "pm_2")]
    assert snapshot.holders.get("pm_3") == scope_key("cus_b", "pm_3")
    assert snapshot.holders.get("pm_9") is None


def test_normalisation_never_crosses_scopes() -> None:
    # Two customers whose ids differ only in case and separator: a slip in one is never the other's member.
    snapshot = scoped_snapshot(
        {"CUS-1": ["PM_Visa"], "cus_1": ["pm_amex"]},
        rules=(Normalisation(case=CaseRule.INSENSITIVE, separators="-_"),),
    )
    assert snapshot.loose_index.get(_loose(scope_key("CUS-1", "pm-visa"))) == scope_key("CUS-1", "PM_Visa")
    assert snapshot.loose_index.get(_loose(scope_key("cus_1", "pm-visa"))) is None
    assert snapshot.loose_index.get(_loose(scope_key("CUS-1", "PM-AMEX"))) is None


def test_within_a_scope_the_set_reads_as_plain_values_with_its_own_retired_history() -> None:
    retired = {
        scope_key("cus_a", "pm_old"): Retirement(None, "pm_1"),
        scope_key("cus_b", "pm_gone"): Retirement(None, ""),
    }
    snapshot = scoped_snapshot({"cus_a": ["pm_2", "pm_1"], "cus_b": ["pm_3"]}, retirements=retired)
    mine = snapshot.within("cus_a")
    assert mine.size == 2 and mine.sorted_members == ("pm_1", "pm_2")
    assert "pm_1" in mine.members and "pm_3" not in mine.members
    assert dict(mine.retirements) == {"pm_old": Retirement(None, "pm_1")}
    assert snapshot.within("cus_nobody").size == 0


@pytest.mark.parametrize("bad", ["pm_1", "\x00pm_1", "x" * 257 + "\x00pm_1"])
def test_a_member_with_no_usable_scope_refuses_the_whole_set(bad: str) -> None:
    with pytest.raises(MalformedScope):
        make_snapshot("s", 1, [scope_key("cus_a", "pm_1"), bad], received_at=0.0, scoped=True)


def test_a_large_scoped_set_is_built_on_the_compact_tables_and_layers_deltas_per_scope() -> None:
    members = {f"cus_{i:05d}": [f"pm_{i:05d}_{j}" for j in range(5)] for i in range(PACK_ABOVE // 5 + 10)}
    snapshot = scoped_snapshot(members)
    assert snapshot.size > PACK_ABOVE
    assert snapshot.holders.get("pm_00007_3") == scope_key("cus_00007", "pm_00007_3")
    delta = DeltaUpdate(
        snapshot.name,
        1,
        2,
        (scope_key("cus_00007", "pm_new"),),
        (scope_key("cus_00007", "pm_00007_3"),),
        MappingProxyType({scope_key("cus_00007", "pm_00007_3"): "pm_new"}),
        scoped=True,
    )
    assert judge_delta(delta, snapshot, 10**7).action is UpdateAction.APPLY
    layered = with_delta(snapshot, delta, now=5.0, rules=())
    assert layered is not None and isinstance(layered.members, OverlaySet) and layered.scoped
    assert set(layered.within("cus_00007").members) == {f"pm_00007_{j}" for j in (0, 1, 2, 4)} | {"pm_new"}
    assert layered.holders.get("pm_new") == scope_key("cus_00007", "pm_new")
    assert layered.holders.get("pm_00007_3") is None
    assert layered.within("cus_00007").retirements["pm_00007_3"].replaced_by == "pm_new"
    assert layered.within("cus_00008").size == 5
    # The next delta lists only the scopes it touches again, over the previous layer.
    following = DeltaUpdate(
        snapshot.name,
        2,
        3,
        (scope_key("cus_00008", "pm_8_new"), scope_key("cus_00007", "pm_more")),
        (scope_key("cus_00007", "pm_new"),),
        MappingProxyType({}),
        scoped=True,
    )
    again = with_delta(layered, following, now=6.0, rules=())
    assert again is not None
    assert set(again.within("cus_00007").members) == {f"pm_00007_{j}" for j in (0, 1, 2, 4)} | {"pm_more"}
    assert set(again.within("cus_00008").members) == {f"pm_00008_{j}" for j in range(5)} | {"pm_8_new"}
    assert again.holders.get("pm_new") is None and again.holders.get("pm_more") == scope_key("cus_00007", "pm_more")


def test_a_delta_to_a_small_scoped_set_rebuilds_it_scoped() -> None:
    snapshot = scoped_snapshot({"cus_a": ["pm_1"], "cus_b": ["pm_3"]})
    delta = DeltaUpdate(snapshot.name, 1, 2, (scope_key("cus_b", "pm_4"),), (), MappingProxyType({}), scoped=True)
    payload = apply_delta(snapshot, delta, now=1.0)
    assert payload.scoped
    rebuilt = make_snapshot(payload.name, payload.version, payload.members, received_at=1.0, scoped=payload.scoped)
    assert set(rebuilt.within("cus_b").members) == {"pm_3", "pm_4"}


def test_deltas_whose_keys_do_not_match_the_sets_scoping_are_refused() -> None:
    scoped = scoped_snapshot({"cus_a": ["pm_1"]})
    plain = make_snapshot("s", 1, ["A", "B"], received_at=0.0)
    bare = DeltaUpdate(scoped.name, 1, 2, ("pm_2",), (), MappingProxyType({}))
    assert judge_delta(bare, scoped, 100).reason == "scope_mismatch"
    keys = DeltaUpdate("s", 1, 2, (scope_key("cus_a", "C"),), (), MappingProxyType({}), scoped=True)
    assert judge_delta(keys, plain, 100).reason == "scope_mismatch"
    nameless = DeltaUpdate(scoped.name, 1, 2, ("\x00pm_2",), (), MappingProxyType({}), scoped=True)
    assert judge_delta(nameless, scoped, 100).reason == "bad_scope"
