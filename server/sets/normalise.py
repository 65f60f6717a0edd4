"""Normalisation of string values: the forms under which formatting slips compare equal."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from argwatch.server.policy.model import CaseRule, Normalisation

# What shape classification forgives, whatever an argument's own normalisation
# says: it answers "why did this miss", not "does the policy accept it". It is
# also the default normalisation, so the common case needs one index, not two.
LOOSE = Normalisation()

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
