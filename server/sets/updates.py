"""Judges and applies updates from a source, purely: what a snapshot, delta or heartbeat does to a set.

Every update is checked before it touches a set. A malformed one is rejected
with a reason (and the last good copy kept); a delta that does not follow the
version the gateway holds asks for a full resync instead of guessing.
Versions are compared only within one incarnation of the owner: an owner that
restarted counts from 1 again, and its first snapshot is the set, not an old
version to refuse (which froze the set as stale until max_staleness).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from argwatch.server.sets.overlay import OverlaySet
from argwatch.server.sets.payload import DeltaUpdate, Retirement, SetPayload
from argwatch.server.sets.retired import MAX_VALUE_CHARS, RetiredHistory
from argwatch.server.sets.scoped import usable_key
from argwatch.server.sets.snapshot import ValueSetSnapshot


class UpdateAction(enum.Enum):
    """What to do with an update."""

    APPLY = "apply"
    RESYNC = "resync"  # fetch the whole set: the update does not follow what we hold
    REJECT = "reject"  # malformed: count it, keep the last good copy
    IGNORE = "ignore"  # nothing to do (an old or repeated version)


class Judgement(NamedTuple):
    action: UpdateAction
    reason: str = ""  # a metric label for rejections: version_order, oversized, empty_name, value_too_long


def judge_snapshot(
    payload: SetPayload, current: ValueSetSnapshot | None, max_members: int, held_incarnation: str = ""
) -> Judgement:
    if not payload.name:
        return Judgement(UpdateAction.REJECT, "empty_name")
    if len(payload.members) > max_members:
        return Judgement(UpdateAction.REJECT, "oversized")
    # Retired values are bounded like members, by count here (len() of the wire's lists: nothing converted yet)
    # and by length while the snapshot is built; the history kept is then cut to the policy's retired_keep.
    if len(payload.retired) + len(payload.retirements) > max_members:
        return Judgement(UpdateAction.REJECT, "too_many_retired")
    # Value lengths are checked while the snapshot is built, a chunk at a time
    # (snapshot.ValueTooLong): a pass over a million members here would stall the loop.
    if current is not None and payload.incarnation != held_incarnation:
        return Judgement(UpdateAction.APPLY)  # the owner restarted its versions: the whole set, whatever its number
    if current is not None and payload.version < current.version:
        return Judgement(UpdateAction.REJECT, "version_order")
    return Judgement(UpdateAction.APPLY)


def judge_delta(
    delta: DeltaUpdate, current: ValueSetSnapshot | None, max_members: int, held_incarnation: str = ""
) -> Judgement:
    if not delta.name:
        return Judgement(UpdateAction.REJECT, "empty_name")
    if delta.to_version <= delta.from_version:
        return Judgement(UpdateAction.REJECT, "version_order")
    if any(len(value) > MAX_VALUE_CHARS for value in (*delta.added, *delta.removed, *delta.replaced_by.values())):
        # What the gateway would keep: members, retired values, replacements.
        return Judgement(UpdateAction.REJECT, "value_too_long")
    if current is None:
        return Judgement(UpdateAction.RESYNC, "unknown_base")
    if (delta.added or delta.removed) and delta.scoped is not current.scoped:
        # Keys and bare values never meet: a bare value in a scoped set would be no scope's, a key in a global
        # set a value a call could send to pass.
        return Judgement(UpdateAction.REJECT, "scope_mismatch")
    if delta.scoped and not all(usable_key(key) for key in (*delta.added, *delta.removed)):
        return Judgement(UpdateAction.REJECT, "bad_scope")
    if delta.incarnation != held_incarnation:
        return Judgement(UpdateAction.RESYNC, "new_incarnation")
    if delta.to_version <= current.version:
        return Judgement(UpdateAction.IGNORE)
    if delta.from_version != current.version:
        return Judgement(UpdateAction.RESYNC, "version_gap")
    # What the set would hold after it: a delta that replaces members near the cap is not growth.
    # Each value once: a removal repeated is one removal, not room for more additions.
    added = set(delta.added)
    grown = sum(1 for value in added if value not in current.members)
    grown -= sum(1 for value in set(delta.removed) if value in current.members and value not in added)
    if current.size + grown > max_members:
        return Judgement(UpdateAction.REJECT, "oversized")
    return Judgement(UpdateAction.APPLY)


def judge_heartbeat(
    version: int, current: ValueSetSnapshot | None, incarnation: str = "", held_incarnation: str = ""
) -> Judgement:
    """A heartbeat confirms the version we hold; a newer one (or another incarnation) means we missed a change."""
    if current is not None and incarnation != held_incarnation:
        return Judgement(UpdateAction.RESYNC, "new_incarnation")
    if current is None or version > current.version:
        return Judgement(UpdateAction.RESYNC, "behind")
    if version < current.version:
        return Judgement(UpdateAction.REJECT, "version_order")
    return Judgement(UpdateAction.APPLY)


def apply_delta(current: ValueSetSnapshot, delta: DeltaUpdate, now: float) -> SetPayload:
    """The payload after the delta: removed members become retired (now, with their replacement), the newest
    last, so that the history kept (snapshot.RetiredKeep) drops the oldest.

    Costs O(delta) and one copy of the retired history (bounded by the policy's retired_keep) on the loop.
    The members are a small set's copied in one C-level pass (about 10 ms a million members); a large set's
    layers, past their hard bound (overlay.py), are handed on as one more layer, which the snapshot's build
    reads a chunk at a time with the loop running between (one Python pass over them was 150-215 ms of the
    loop at a million members). Dropping the removed members happens while the snapshot is indexed, a chunk
    at a time, too.
    """
    members = current.members
    # A value listed twice in one delta is added once (a scoped listing would otherwise list it twice).
    added = [value for value in dict.fromkeys(delta.added) if value not in members]
    return SetPayload(
        name=current.name,
        version=delta.to_version,
        members=OverlaySet(members, frozenset(added), frozenset())
        if isinstance(members, OverlaySet)
        else [*members, *added],
        retirements=retired_after(current, delta, now),
        excluded=frozenset(value for value in delta.removed if value in members) - frozenset(delta.added),
        incarnation=delta.incarnation,
        scoped=current.scoped,
    )


def retired_after(current: ValueSetSnapshot, delta: DeltaUpdate, now: float) -> RetiredHistory:
    """The history after `delta`: the values it removes appended (retired now: members it takes out, and
    values its owner retires without their being members), the values it adds again dropped.
    O(history + delta): the history is bounded by retired_keep."""
    history = current.retirements.copy()
    for value in delta.removed:
        history.retire(value, Retirement(now, delta.replaced_by.get(value, "")))
    for value in delta.added:
        history.restore(value)
    return history
