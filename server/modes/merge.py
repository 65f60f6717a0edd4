"""Two copies of the fleet's mode state made one: Redis's, and what a replica holds that Redis lacks.

A replica audits by itself while Redis is away (refusals, expiries, reloads),
and may hold a change Redis lost in a failover. Versions cannot tell which copy
holds more: each replica bumps its own for what it audits alone, so a replica
with a higher version may lack a change the others made meanwhile, and writing
it over Redis's would lose that change (one confirmed by a replica of Redis,
too). So nothing is ever written over: the entries only one side holds are
added to Redis's copy, and each override follows the latest change of its
target, whichever side made it (by the times the changes were stamped).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from argwatch.server.modes.document import ModeChange, ModeDocument, Target, with_entries

MODE_OUTCOMES = frozenset({"applied", "cleared", "expired"})  # the entries that change an override


def missing_from(shared: ModeDocument, local: ModeDocument, keep: tuple[int, int]) -> list[ModeChange]:
    """The entries of `local` that `shared` lacks, within what `shared` keeps (`keep`: its most audit
    entries and refusals; an older entry it cut is not missing). An expiry `shared` has audited already
    (every replica reverts an override by itself while Redis is away) is not missing either."""
    missing: list[ModeChange] = []
    for mine, theirs, most in ((local.audit, shared.audit, keep[0]), (local.refused, shared.refused, keep[1])):
        if not mine or (mine[-len(theirs) :] == theirs and (len(theirs) >= most or len(mine) == len(theirs))):
            continue  # the usual case, the same tail: nothing more here
        known = set(theirs)
        floor = min(entry.at for entry in theirs) if theirs and len(theirs) >= most else float("-inf")
        expired = {(e.target, e.check, e.reason) for e in theirs if e.outcome == "expired"}
        missing.extend(
            entry
            for entry in mine
            if entry.at >= floor
            and entry not in known
            and not (entry.outcome == "expired" and (entry.target, entry.check, entry.reason) in expired)
        )
    return missing


def merge(shared: ModeDocument, local: ModeDocument, keep: tuple[int, int]) -> ModeDocument:
    """`shared` with what only `local` holds (missing_from), at a version above both; `shared` itself when
    nothing is missing. Each target's override is the one its latest change left, on whichever side."""
    missing = missing_from(shared, local, keep)
    if not missing:
        return shared
    ours = set(missing)
    latest: dict[Target, ModeChange] = {}
    for entry in (*shared.audit, *missing):  # at equal times, ours: it is the one Redis did not keep
        if entry.outcome in MODE_OUTCOMES and not entry.target.startswith("@"):  # not a reload's, a shadow's
            target = Target(entry.target, entry.check)
            if target not in latest or entry.at >= latest[target].at:
                latest[target] = entry
    overrides = dict(shared.overrides)
    for target, entry in latest.items():
        if entry in ours:
            mine = local.overrides.get(target)
            if mine is None:
                overrides.pop(target, None)
            else:
                overrides[target] = mine
    merged = replace(shared, version=max(shared.version, local.version) + 1, overrides=MappingProxyType(overrides))
    return with_entries(merged, [*shared.entries(), *missing])
