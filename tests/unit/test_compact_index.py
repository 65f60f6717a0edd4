"""The compact index answers what a dict of normalised forms answers, without storing the forms."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from argwatch.server.policy.model import CaseRule, Normalisation
from argwatch.server.sets.compact_index import CompactIndex
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.sharded import SHARD_ABOVE
from argwatch.server.verdict.set_checks import classify_shape
from tests.snapshots import make_snapshot

STRICT_CASE = Normalisation(case=CaseRule.SENSITIVE)


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


def dict_index(members: list[str], apply) -> dict[str, str]:
    index: dict[str, str] = {}
    for member in members:
        index.setdefault(apply(member), member)
    return index


@pytest.mark.parametrize("rule", [LOOSE, STRICT_CASE])
def test_same_answers_as_a_dict_first_member_wins(rule: Normalisation) -> None:
    members = colliding_members(5000, seed=7)
    apply = normaliser(rule)
    compact = CompactIndex(apply, members, len(members))
    for position in range(len(members)):
        compact.add(position)
    expected = dict_index(members, apply)
    assert len(compact) == len(expected)
    assert sorted(compact) == sorted(expected)
    for key, member in expected.items():
        assert compact.get(key) == member
        assert compact[key] == member
    for missing in ("", "code-999999", "nothing", "CODE"):
        assert compact.get(apply(missing)) is expected.get(apply(missing))
    with pytest.raises(KeyError):
        compact["no such form"]


def test_refuses_more_members_than_it_was_sized_for() -> None:
    members = [f"m{i}" for i in range(100)]
    compact = CompactIndex(str.casefold, members, 4)  # 16 slots: at most 8 members
    with pytest.raises(OverflowError):
        for position in range(len(members)):
            compact.add(position)


def test_a_large_snapshot_classifies_misses_as_a_small_one_does() -> None:
    members = colliding_members(SHARD_ABOVE + 5000, seed=11)
    large = make_snapshot("big", 1, members, received_at=0.0, rules=[STRICT_CASE])
    small_members = members[:5000]
    assert isinstance(large.loose_index, CompactIndex)
    assert isinstance(large.index_for(STRICT_CASE), CompactIndex)
    expected_loose = dict_index(members, normaliser(LOOSE))
    expected_strict = dict_index(members, normaliser(STRICT_CASE))
    for value in [*small_members[:300], "CODE 12", "code_12", "zzz", " Code-5 "]:
        slip = value.swapcase()
        assert large.loose_index.get(normaliser(LOOSE)(slip)) == expected_loose.get(normaliser(LOOSE)(slip))
        assert large.index_for(STRICT_CASE).get(normaliser(STRICT_CASE)(slip)) == expected_strict.get(
            normaliser(STRICT_CASE)(slip)
        )
        if slip not in large.members:
            shape, suggestion = classify_shape(slip, large)
            assert suggestion == expected_loose.get(normaliser(LOOSE)(slip), "")
            assert shape.value in ("case", "separator", "invented", "retired")
