"""Snapshots built in one go, for tests (the gateway builds them a chunk at a time: make_snapshot_async)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set

from argwatch.server.policy.model import Normalisation
from argwatch.server.sets.payload import Retirement
from argwatch.server.sets.retired import KEEP_ALL, RetiredKeep
from argwatch.server.sets.snapshot import ValueSetSnapshot, snapshot_steps


def make_snapshot(
    name: str,
    version: int,
    members: Iterable[str],
    retired: Iterable[str] = (),
    *,
    received_at: float,
    rules: Iterable[Normalisation] = (),
    retirements: Mapping[str, Retirement] | None = None,
    excluded: Set[str] = frozenset(),
    keep: RetiredKeep = KEEP_ALL,
    scoped: bool = False,
) -> ValueSetSnapshot:
    """The snapshot the gateway would build of these members (scope keys, when `scoped`). A member is never
    also retired."""
    listed = members if isinstance(members, Sequence) else tuple(members)
    steps = snapshot_steps(name, version, listed, retired, received_at, rules, retirements, excluded, keep, scoped)
    made: object = None
    while True:
        try:
            step = steps.send(made)
        except StopIteration as built:
            return built.value  # type: ignore[no-any-return]
        made = step() if step is not None else None  # work the gateway runs off the loop, here in place
