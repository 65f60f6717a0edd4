"""Two copies of the fleet's mode state made one: Redis's, and what a replica holds that Redis lacks.

A replica audits by itself while Redis is away (refusals, expiries, reloads),
may hold a change Redis lost in a failover, and may hold overrides Redis lost
in a restart. Versions cannot tell which copy holds more: each replica bumps
its own for what it audits alone, so a replica with a higher version may lack
a change the others made meanwhile, and writing it over Redis's would lose that
change (one confirmed by a replica of Redis, too). So nothing is written over:
the entries only this replica holds are added to Redis's copy, and a target's
override is this replica's only where this replica knows of a later change of
it than anything Redis holds (last writer wins, by the times changes were
stamped). An expiry a replica noticed by itself reverts only an override that
had expired by then: never one set since, by a replica that had not seen the
expired one.

Every copy orders its entries by time and cuts the oldest to its limit
(document.record), so an entry older than the oldest Redis kept, or as old,
was cut, not lost: it is never written back again and again.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from argwatch.server.modes.document import (
    POLICY_TARGET,
    SHADOW_TARGET,
    ModeChange,
    ModeDocument,
    Override,
    Target,
    with_entries,
)

MODE_OUTCOMES = frozenset({"applied", "cleared", "expired"})  # the entries that change an override


def missing_from(shared: ModeDocument, local: ModeDocument, keep: tuple[int, int]) -> list[ModeChange]:
    """The entries of `local` that `shared` lacks, within what `shared` keeps (`keep`: its most audit
    entries and refusals; an entry no newer than the oldest it kept, when it is full, was cut, not lost).
    An expiry Redis has audited already, made by another replica's clock, is not missing either."""
    missing: list[ModeChange] = []
    for mine, theirs, most in ((local.audit, shared.audit, keep[0]), (local.refused, shared.refused, keep[1])):
        if _holds_all(theirs, mine, most):
            continue  # the usual case: nothing more here
        known = set(theirs)
        # The oldest kept (the lists are in time order); at equal times Redis may have cut one and kept another.
        floor = theirs[0].at if theirs and len(theirs) >= most else float("-inf")
        expired = {_expiry(entry) for entry in theirs if entry.outcome == "expired"}
        missing.extend(
            entry
            for entry in mine
            if entry.at > floor
            and entry not in known
            and not (entry.outcome == "expired" and _expiry(entry) in expired)
        )
    return missing


def _holds_all(theirs: tuple[ModeChange, ...], mine: tuple[ModeChange, ...], most: int) -> bool:
    """Whether `theirs` holds every entry of `mine` it would keep, when `mine`'s newest entries are a run of
    `theirs` (the same, or Redis a few entries ahead: every re-read and announcement), in O(that run)."""
    if not mine:
        return True
    last = mine[-1]
    for end in range(len(theirs) - 1, -1, -1):  # from the newest: Redis is at most a few entries ahead
        if theirs[end] == last:
            break
    else:
        return False
    run = min(len(mine), end + 1)
    if theirs[end + 1 - run : end + 1] != mine[-run:]:
        return False
    # `mine` holds older entries than the run only if `theirs` is full: then none is newer than its oldest.
    return run == len(mine) or len(theirs) >= most


def _expiry(entry: ModeChange) -> tuple[str, str, str]:
    """What names an expired override in its entry ("override by ana expired (INC-1)"). Every replica reverts
    it by itself while Redis is away, each at its own time: one entry is kept. (The same words naming an
    override set again are read as the same: that one's expiry is then audited when next due, within a
    second, by whichever replica finds it still in Redis.)"""
    return entry.target, entry.check, entry.reason


def merge(shared: ModeDocument, local: ModeDocument, keep: tuple[int, int]) -> ModeDocument:
    """`shared` with what only `local` holds (missing_from), at a version above both; `shared` itself when
    nothing is missing."""
    missing = missing_from(shared, local, keep)
    if not missing:
        return shared
    merged = replace(
        shared,
        version=max(shared.version, local.version) + 1,
        overrides=MappingProxyType(_overrides(shared, local, missing)),
    )
    return with_entries(merged, [*shared.entries(), *missing])


def _overrides(shared: ModeDocument, local: ModeDocument, missing: list[ModeChange]) -> dict[Target, Override]:
    """Redis's overrides, each target's taken from `local` where `local` knows a later change of it."""
    known: dict[Target, float] = {}  # the time of the latest change of each target Redis knows of
    for target, override in shared.overrides.items():
        known[target] = override.set_at
    for entry in shared.audit:
        if _changes_a_mode(entry):
            target = Target(entry.target, entry.check)
            known[target] = max(known.get(target, entry.at), entry.at)
    ours: dict[Target, ModeChange] = {}  # the latest change of each target among the missing entries
    for entry in missing:
        if _changes_a_mode(entry):
            target = Target(entry.target, entry.check)
            if target not in ours or ours[target].at <= entry.at:  # in time order: at equal times, the later
                ours[target] = entry
    overrides = dict(shared.overrides)
    for target in {*local.overrides, *ours}:
        since = known.get(target, float("-inf"))
        mine, latest = local.overrides.get(target), ours.get(target)
        if mine is not None and mine.set_at > since:
            overrides[target] = mine  # set after anything Redis knows of the target (Redis lost it)
        elif latest is not None and latest.at > since and latest.outcome == "cleared":
            overrides.pop(target, None)
        elif latest is not None and latest.at > since and latest.outcome == "expired":
            theirs = overrides.get(target)
            if theirs is not None and theirs.expires_at is not None and theirs.expires_at <= latest.at:
                del overrides[target]  # the same override, or one as expired by then
    return overrides


def _changes_a_mode(entry: ModeChange) -> bool:
    return entry.outcome in MODE_OUTCOMES and entry.target not in (POLICY_TARGET, SHADOW_TARGET)
