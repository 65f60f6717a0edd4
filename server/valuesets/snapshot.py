"""An immutable, versioned copy of one value set, with the indexes the checker needs built once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from argwatch.server.normalise import CASE_ONLY, LOOSE, build_index, normaliser
from argwatch.server.policy_model import Normalisation
from argwatch.server.valuesets.payload import Retirement


@dataclass(frozen=True, slots=True, eq=False)
class ValueSetSnapshot:
    """One version of a value set, as fetched from its source. Never mutated.

    Compared by identity (eq=False): field-wise equality would compare whole
    member sets; versions are compared explicitly where it matters.
    """

    name: str
    version: int
    members: frozenset[str]
    # The members in sorted order: for listing, and for deterministic nearest-value ties.
    sorted_members: tuple[str, ...]
    retired: frozenset[str]
    # When and by what some retired values were replaced, where the source said.
    retirements: Mapping[str, Retirement]
    # Wall-clock time (epoch seconds) at which this version arrived. When the source
    # last *confirmed* it is the provider's business (heartbeats confirm without a new snapshot).
    received_at: float
    # normalised form -> legal member, for each normalisation the policy binds to this set.
    by_rule: Mapping[Normalisation, Mapping[str, str]]
    # For shape classification: case-only and loose (case, separators, blanks) indexes.
    case_index: Mapping[str, str]
    loose_index: Mapping[str, str]
    loose_retired: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.members)

    def index_for(self, rule: Normalisation) -> Mapping[str, str]:
        """The index for `rule`, built now if the policy did not announce it (rare: costs O(n))."""
        index = self.by_rule.get(rule)
        return index if index is not None else build_index(self.members, rule)


class SetReading(NamedTuple):
    """A set as the checker may use it now: its snapshot, when its source last confirmed it, and whether stale."""

    snapshot: ValueSetSnapshot
    confirmed_at: float  # epoch seconds
    stale: bool


def make_snapshot(
    name: str,
    version: int,
    members: Iterable[str],
    retired: Iterable[str] = (),
    *,
    received_at: float,
    rules: Iterable[Normalisation] = (),
    retirements: Mapping[str, Retirement] | None = None,
) -> ValueSetSnapshot:
    """Builds a snapshot and its indexes (O(members)). A member is never also retired."""
    member_set = frozenset(members)
    details = dict(retirements or {})
    retired_set = (frozenset(retired) | frozenset(details)) - member_set
    loose = normaliser(LOOSE)
    return ValueSetSnapshot(
        name=name,
        version=version,
        members=member_set,
        sorted_members=tuple(sorted(member_set)),
        retired=retired_set,
        retirements=MappingProxyType({v: d for v, d in details.items() if v in retired_set}),
        received_at=received_at,
        by_rule=MappingProxyType({rule: build_index(member_set, rule) for rule in set(rules)}),
        case_index=build_index(member_set, CASE_ONLY),
        loose_index=build_index(member_set, LOOSE),
        loose_retired=frozenset(loose(value) for value in retired_set),
    )
