"""Normalisation of string values, and the index that maps a normalised value back to the legal one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType

from argwatch.server.policy_model import CaseRule, Normalisation

# What shape classification forgives, whatever an argument's own normalisation
# says: it answers "why did this miss", not "does the policy accept it".
CASE_ONLY = Normalisation(case=CaseRule.INSENSITIVE, separators="", trim=False)
LOOSE = Normalisation(case=CaseRule.INSENSITIVE, separators="-_ ./", trim=True)

Normaliser = Callable[[str], str]


@lru_cache(maxsize=256)
def normaliser(rule: Normalisation) -> Normaliser:
    """A function applying `rule`; built once per distinct rule."""
    # Every separator becomes the first one, so "a-b", "a b" and "a_b" compare equal.
    table = str.maketrans({char: rule.separators[0] for char in rule.separators[1:]})
    fold = rule.case is CaseRule.INSENSITIVE
    trim = rule.trim

    def apply(value: str) -> str:
        if trim:
            value = value.strip()
        if fold:
            value = value.casefold()
        return value.translate(table) if table else value

    return apply


def build_index(members: Iterable[str], rule: Normalisation) -> Mapping[str, str]:
    """normalised form -> legal member; the first member wins where two collide (sorted order)."""
    apply = normaliser(rule)
    index: dict[str, str] = {}
    for member in sorted(members):
        index.setdefault(apply(member), member)
    return MappingProxyType(index)
