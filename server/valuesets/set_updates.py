"""Takes what a source sent into the set table: judges each update (updates.py), then installs, confirms or refuses.

A malformed update (version going backwards, empty name, too many members, an
over-long value) is refused and counted; the last good copy stays, stale, with
the refusal as its cause. A heartbeat naming the refused version again is not
fetched again: the owner must publish another version. An update that does not
follow the version held asks its follower for a resync (`resync`), never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from argwatch.server.sets.overlay import compaction_due, with_delta
from argwatch.server.sets.payload import (
    DeltaUpdate,
    HeartbeatUpdate,
    OversizedDelta,
    OversizedSnapshot,
    SetPayload,
    SnapshotUpdate,
    Update,
)
from argwatch.server.sets.updates import UpdateAction, apply_delta, judge_delta, judge_heartbeat, judge_snapshot
from argwatch.server.valuesets.freshness import RefreshOutcome, RefreshResult, StaleCause
from argwatch.server.valuesets.set_state import SetState
from argwatch.server.valuesets.set_table import SetTable

# Asks for a set to be fetched whole from its source, with the reason (a metric label).
Resync = Callable[[SetState, str], None]


class SetUpdates:
    """Judges updates and whole sets from the sources, and applies them to the table."""

    def __init__(self, table: SetTable, resync: Resync, clock: Callable[[], float]) -> None:
        self._table = table
        self._resync = resync
        self._clock = clock

    async def take_update(self, source: str, update: Update, by_name: Mapping[str, SetState]) -> None:
        """One message from `source`'s watch stream, over the sets it serves (`by_name`)."""
        if isinstance(update, HeartbeatUpdate):
            self._take_heartbeat(source, update, by_name)
            return
        name = update.payload.name if isinstance(update, SnapshotUpdate) else update.name
        state = by_name.get(name)
        if state is None:
            self._table.count_refusal("_unknown", "empty_name" if not name else "unknown_set")
        elif isinstance(update, OversizedSnapshot):  # refused part by part, as it arrived (grpc_source.py)
            self._table.refuse(state, "parts_oversized", update.incarnation, update.version, update.members)
        elif isinstance(update, OversizedDelta):  # too many values for one delta: the set is fetched whole
            self._table.refuse(state, "oversized_delta", update.incarnation, update.to_version, whole_set=False)
            self._resync(state, "delta_refused")
        elif isinstance(update, SnapshotUpdate):
            await self.take_whole(state, update.payload)
        else:
            await self._take_delta(state, update)

    def _take_heartbeat(self, source: str, update: HeartbeatUpdate, by_name: Mapping[str, SetState]) -> None:
        for name, state in by_name.items():
            version = update.versions.get(name)
            if version is None:
                # The heartbeat lists every watched set the source serves (sources.proto).
                self._table.mark_unconfirmed(state, StaleCause.NOT_SERVED, f"source {source} does not serve it")
                continue
            held = state.held == (update.incarnation, version)
            if not held and state.refusal is not None and state.refusal.names(update.incarnation, version):
                continue  # still the set refused: fetching it again would be refused again
            judged = judge_heartbeat(version, state.snapshot, update.incarnation, state.incarnation)
            if judged.action is UpdateAction.APPLY:
                self._table.confirm(state)
            elif judged.action is UpdateAction.RESYNC:
                self._resync(state, judged.reason)
            else:
                self._table.refuse(state, judged.reason, update.incarnation, version)

    async def _take_delta(self, state: SetState, delta: DeltaUpdate) -> None:
        judged = judge_delta(delta, state.snapshot, state.config.max_members, state.incarnation)
        if judged.action is UpdateAction.APPLY:
            assert state.snapshot is not None
            table = self._table
            layered = with_delta(state.snapshot, delta, now=self._clock(), rules=state.rules, keep=table.keep(state))
            if layered is not None:  # O(delta): layers over the current tables
                if state.replay is not None:
                    state.replay.append(delta)  # a compaction runs: it replays this over its new base
                table.swap_in(state, layered)
                if compaction_due(layered):
                    table.compact_soon(state)
            else:  # a small set, or layers past their hard bound: re-index in full (in chunks)
                await table.install(state, apply_delta(state.snapshot, delta, self._clock()))
        elif judged.action is UpdateAction.RESYNC:
            self._resync(state, judged.reason)
        elif judged.action is UpdateAction.REJECT:
            self._table.refuse(state, judged.reason, delta.incarnation, delta.to_version, whole_set=False)
            if judged.reason == "oversized":
                # The delta is refused; the set it leads to is the owner's to judge whole: fetch it.
                self._resync(state, "delta_refused")

    async def take_whole(self, state: SetState, payload: SetPayload) -> RefreshResult:
        """Judges and installs a whole set a source answered with; says what that did."""
        before = state.held
        judged = judge_snapshot(payload, state.snapshot, state.config.max_members, state.incarnation)
        if judged.action is not UpdateAction.APPLY:
            members = len(payload.members)
            refusal = self._table.refuse(state, judged.reason, payload.incarnation, payload.version, members)
            return RefreshResult(RefreshOutcome.REFUSED, refusal.detail)
        if not await self._table.install(state, payload):
            assert state.refusal is not None
            return RefreshResult(RefreshOutcome.REFUSED, state.refusal.detail)
        if before == (payload.incarnation, payload.version):
            return RefreshResult(RefreshOutcome.CONFIRMED, f"version {payload.version} confirmed")
        held = "nothing" if before is None else f"version {before[1]}"
        size = state.snapshot.size if state.snapshot is not None else 0
        return RefreshResult(RefreshOutcome.NEW_VERSION, f"{held} -> version {payload.version} ({size} members)")
