"""Packed large sets answer exactly what a Python set and dicts of normalised forms answer: no false member, ever."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from argwatch.server.policy.model import CaseRule, Normalisation
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.packed import PACK_ABOVE, PackedForms, PackedHolders, PackedListing, PackedMembers
from argwatch.server.sets.scoped import MalformedScope, scope_key, split_key, value_of, within_scope
from argwatch.server.verdict.set_checks import classify_shape
from tests.snapshots import make_snapshot

STRICT_CASE = Normalisation(case=CaseRule.SENSITIVE)
# Any code point, lone surrogates and NUL included: a JSON file can hold either.
TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)


def colliding_members(count: int, seed: int) -> list[str]:
    """Members of which many share a loose form: case and separator variants of a smaller pool."""
    rng = random.Random(seed)
    pool = [f"code{rng.randrange(count // 3)}" for _ in range(count)]
    shapes: list[Callable[[str], str]] = [
        str.upper,
        str.lower,
        lambda v: v[:2] + "-" + v[2:],
        lambda v: v[:2] + "_" + v[2:].upper(),
    ]
    return [rng.choice(shapes)(value) for value in pool]


def dict_index(members: list[str], apply: Callable[[str], str]) -> dict[str, str]:
    index: dict[str, str] = {}
    for member in members:
        index.setdefault(apply(member), member)
    return index


def packed(values: list[str], chunk: int = 7) -> PackedMembers:
    members = PackedMembers(len(values))
    for start in range(0, len(values), chunk):
        members.add_chunk(values[start : start + chunk])
    return members


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=60), st.lists(TEXT, max_size=30))
@example(["a", "a\x00", "\ud800", "é", ""], ["\udc00", "e\u0301", "a\x00\x00", "A"])
def test_membership_is_exactly_a_python_sets(values: list[str], probes: list[str]) -> None:
    members = packed(values)
    expected = set(values)
    assert len(members) == len(expected)
    assert list(members) == list(dict.fromkeys(values))  # each once, in the order first added
    for probe in [*values, *probes]:
        assert (probe in members) is (probe in expected)
    others: list[object] = [5, None, b"a"]
    assert all(other not in members for other in others)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=60), st.lists(TEXT, max_size=30))
def test_an_index_answers_what_a_dict_of_forms_answers(values: list[str], probes: list[str]) -> None:
    members = packed(values)
    apply = normaliser(LOOSE)
    index = PackedForms(apply, members, len(values))
    index.add_range(0, len(members))
    expected = dict_index(values, apply)
    assert len(index) == len(expected) and dict(index) == expected
    for probe in [*values, *probes]:
        assert index.get(apply(probe)) == expected.get(apply(probe))
        assert index.get(probe, "default") == expected.get(probe, "default")


@pytest.mark.parametrize("rule", [LOOSE, STRICT_CASE])
def test_first_member_in_order_wins_a_form(rule: Normalisation) -> None:
    values = colliding_members(5000, seed=7)
    members = packed(values, chunk=1024)
    apply = normaliser(rule)
    index = PackedForms(apply, members, len(values))
    index.add_range(0, len(members))
    expected = dict_index(values, apply)
    assert sorted(index) == sorted(expected)
    for key, member in expected.items():
        assert index[key] == member
    with pytest.raises(KeyError):
        index["no such form"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["c1", "c2", "CUS-1", "cus_1", "é"]), TEXT), max_size=60),
    st.lists(TEXT, max_size=20),
)
def test_a_scoped_set_lists_each_scope_and_finds_a_values_holder(pairs: list[tuple[str, str]], probes: list[str]):
    keys = [scope_key(scope, value) for scope, value in pairs]
    members = PackedMembers(len(keys), scoped=True)
    members.add_chunk(keys)
    unique = list(dict.fromkeys(keys))
    assert set(members) == set(keys)
    listing, holders = PackedListing(members), PackedHolders(members)
    expected_listing: dict[str, list[str]] = {}
    expected_holders: dict[str, str] = {}
    for key in unique:
        expected_listing.setdefault(split_key(key)[0], []).append(key)
        expected_holders.setdefault(value_of(key), key)
    assert {scope: list(keys) for scope, keys in listing.items()} == expected_listing
    assert dict(holders) == expected_holders
    for probe in [*probes, "c1", "c3", "c1\x00"]:
        assert holders.get(probe) == expected_holders.get(probe)
        assert (probe in listing) is (probe in expected_listing)
    # Scopes stay apart: a value is a member only under the scope that holds it.
    for _, value in pairs:
        for other in ("c1", "c2", "CUS-1", "cus_1", "é"):
            assert (scope_key(other, value) in members) is (scope_key(other, value) in set(keys))


def test_a_chunk_with_a_key_that_names_no_scope_is_refused_whole() -> None:
    members = PackedMembers(10, scoped=True)
    members.add_chunk(["c1\x00a"])
    for bad in ("no separator", "\x00empty scope", "s" * 257 + "\x00a"):
        with pytest.raises(MalformedScope):
            members.add_chunk(["c1\x00b", bad])
        assert list(members) == ["c1\x00a"]


def test_refuses_more_members_than_it_was_sized_for() -> None:
    members = PackedMembers(4)
    with pytest.raises(OverflowError):
        members.add_chunk([f"m{i}" for i in range(5)])
    assert len(members) == 4 and all(f"m{i}" in members for i in range(4))


def test_a_large_snapshot_is_packed_and_classifies_misses_as_a_small_one_does() -> None:
    members = colliding_members(PACK_ABOVE + 5000, seed=11)
    large = make_snapshot("big", 1, members, received_at=0.0, rules=[STRICT_CASE])
    assert isinstance(large.members, PackedMembers)
    assert isinstance(large.loose_index, PackedForms)
    assert isinstance(large.index_for(STRICT_CASE), PackedForms)
    expected_loose = dict_index(members, normaliser(LOOSE))
    expected_strict = dict_index(members, normaliser(STRICT_CASE))
    for value in [*members[:300], "CODE 12", "code_12", "zzz", " Code-5 "]:
        slip = value.swapcase()
        assert large.loose_index.get(normaliser(LOOSE)(slip)) == expected_loose.get(normaliser(LOOSE)(slip))
        assert large.index_for(STRICT_CASE).get(normaliser(STRICT_CASE)(slip)) == expected_strict.get(
            normaliser(STRICT_CASE)(slip)
        )
        if slip not in large.members:
            shape, suggestion = classify_shape(slip, large)
            assert suggestion == expected_loose.get(normaliser(LOOSE)(slip), "")
            assert shape.value in ("case", "separator", "invented", "retired")


def test_a_large_scoped_snapshot_normalises_within_the_scope_only() -> None:
    keys = [scope_key(f"cus_{i % 9000:05d}", f"PM-{i:06d}") for i in range(PACK_ABOVE + 100)]
    large = make_snapshot("pm", 1, keys, received_at=0.0, scoped=True)
    assert isinstance(large.members, PackedMembers) and large.scoped
    loose = within_scope(normaliser(LOOSE))
    assert large.loose_index.get(loose(scope_key("cus_00001", "pm_009001"))) == scope_key("cus_00001", "PM-009001")
    assert large.loose_index.get(loose(scope_key("cus_00002", "pm_009001"))) is None
    assert list(large.by_scope["cus_00003"])[:2] == [
        scope_key("cus_00003", "PM-000003"),
        scope_key("cus_00003", "PM-009003"),
    ]
    assert large.holders.get("PM-000004") == scope_key("cus_00004", "PM-000004")
    assert sorted(large.within("cus_00005").members)[:1] == ["PM-000005"]


def test_scopes_past_the_first_table_are_all_found_after_it_grows() -> None:
    keys = [scope_key(f"tenant-{i % 3000}", f"v{i}") for i in range(6000)]
    members = PackedMembers(len(keys), scoped=True)
    for start in range(0, len(keys), 1000):
        members.add_chunk(keys[start : start + 1000])
    members.shrink()
    assert len(members.scope_names()) == 3000
    for i in range(3000):
        assert members.scope_keys(f"tenant-{i}") == (
            scope_key(f"tenant-{i}", f"v{i}"),
            scope_key(f"tenant-{i}", f"v{i + 3000}"),
        )
    assert members.scope_keys("tenant-3000") == ()
    assert all(key in members for key in keys) and scope_key("tenant-1", "v2") not in members
    with pytest.raises(OverflowError):
        members.add_chunk([scope_key("tenant-1", "new")])
