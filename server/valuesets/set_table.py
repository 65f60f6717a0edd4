"""The set table: every value set's copy, swapped in whole or layered, its health and the cause of staleness.

What the checker reads (`read`) is a dictionary look-up and two comparisons: no
await, no lock, no I/O. Everything else here is called by what follows the
sources (source_follower.py) and what judges their updates (set_updates.py):
install a copy, confirm it, or record why it is not fresh.

How fresh a copy is: confirmed within its TTL and its source healthy -> fresh;
otherwise stale, still used, and every check against it is counted; older than
`max_staleness` -> unavailable, and checks fail open (or closed, per policy).
Every set carries the cause of its staleness (freshness.StaleCause); a cause
that is over is never shown as current.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from argwatch.common.tasks import TaskSet
from argwatch.server.policy.model import Policy
from argwatch.server.sets.overlay import OverlaySet, base_members, with_delta
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate, SetPayload
from argwatch.server.sets.retired import RetiredKeep, ValueTooLong
from argwatch.server.sets.scoped import MalformedScope
from argwatch.server.sets.snapshot import SetReading, ValueSetSnapshot, make_snapshot_async
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.metrics import GatewayMetrics, ValueSetHealth
from argwatch.server.valuesets import persist
from argwatch.server.valuesets.freshness import Refusal, StaleCause, refusal_words
from argwatch.server.valuesets.release_memory import release_free_memory
from argwatch.server.valuesets.set_state import CARRIED_OVER, SetState, SetStatus, cause_now, rules_by_set

log = logging.getLogger("argwatch.valuesets")

# Last-good copies on disk are rewritten at most this often per set.
SAVE_INTERVAL_SECONDS = 30.0
# After a large set is installed, free memory goes back to the OS this much later: by then
# the update that carried it has been dropped and readers of the replaced version are done.
RELEASE_AFTER_SECONDS = 1.0
# How long a loop turn replays deltas over a compaction's new base (at least one a turn). A count (64) made
# turns of several milliseconds when a delta's layers folded.
REPLAY_STEP_SECONDS = 0.001
# Refusals of a set too large to hold (its cause: TOO_LARGE, "serving the last copy until it publishes another").
_TOO_LARGE = frozenset({"oversized", "too_many_retired", "parts_oversized"})


class KeptGuard(NamedTuple):
    """read's first branch for one set: its reading is handed out again while `clock()` is before `until`,
    the state's attribute `same` names is still the object, and `equal`'s still equals the value."""

    until: float
    clock: Callable[[], float]
    same: tuple[object, str, object]
    equal: tuple[object, str, object]


class SetTable:
    """Every configured set's state, and each change to it; see the module docstring."""

    def __init__(
        self,
        policy: Policy,
        metrics: GatewayMetrics,
        events: EventLog,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        snapshot_dir: str | None,
    ) -> None:
        self.policy = policy
        self._metrics = metrics
        self._events = events
        self._clock = clock
        self._monotonic = monotonic
        self._snapshot_dir = snapshot_dir
        rules = rules_by_set(policy)
        self.states = {name: SetState(config, rules.get(name, ())) for name, config in policy.value_sets.items()}
        self._source_up: dict[str, bool] = {name: False for name in policy.sources}
        self._up_since: dict[str, float] = {}  # when each source last went from down to up (monotonic)
        self._tasks = TaskSet(log, "value-set table")
        self._release_pending = False  # a release of free memory is scheduled (after a large set)

    async def close(self) -> None:
        await self._tasks.cancel_all()

    # ---- the hot path

    def read(self, name: str) -> SetReading | None:
        """The set as the checker may use it now, or None when it is unavailable."""
        state = self.states.get(name)
        if state is None:
            return None
        now = self._monotonic()
        kept = state.kept
        if kept is not None and now < kept[2] and kept[0] == state.generation:
            return kept[1]  # still fresh, and nothing it is made of written since it was made
        generation = state.generation  # before any field is read: a write after this makes what is kept stale
        if state.snapshot is None:
            return None
        age = now - state.confirmed_mono
        config = state.config
        if age > config.max_staleness_seconds:
            return None
        stale = not state.healthy or age > config.ttl_seconds
        reading = state.reading
        if (
            reading is None
            or reading.stale is not stale
            or reading.snapshot is not state.snapshot
            or reading.confirmed_at != state.confirmed_at
        ):
            reading = state.reading = SetReading(state.snapshot, state.confirmed_at, stale)
        if not stale:  # fresh while its age is within both bounds, and the state is as it was read
            until = state.confirmed_mono + min(config.ttl_seconds, config.max_staleness_seconds)
            state.kept = (generation, reading, until)
        return reading

    def kept_guard(self, name: str, reading: SetReading) -> KeptGuard | None:
        """What read(name) checks before handing `reading` out again without reading the state, while it is
        the reading kept: None when it is not (stale, or written since). edge/native_answers.py re-checks
        these per call instead of calling read."""
        state = self.states.get(name)
        kept = state.kept if state is not None else None
        if state is None or kept is None or kept[1] is not reading or kept[0] != state.generation:
            return None
        return KeptGuard(kept[2], self._monotonic, (state, "kept", kept), (state, "generation", kept[0]))

    # ---- reports

    def statuses(self) -> list[SetStatus]:
        """Every configured set, in policy order."""
        now = self._monotonic()
        result = []
        for state in self.states.values():
            reading = self.read(state.name)
            age = now - state.confirmed_mono if state.snapshot is not None else math.inf
            connected = self._source_up.get(state.config.source, False)
            back_since = self._up_since.get(state.config.source, -math.inf) if connected else -math.inf
            cause, words = cause_now(state, reading, age, back_since)
            result.append(
                SetStatus(
                    config=state.config,
                    snapshot=state.snapshot,
                    confirmed_at=state.confirmed_at,
                    age_seconds=age,
                    stale=reading is None or reading.stale,
                    available=reading is not None,
                    source_connected=connected,
                    cause=cause,
                    last_error=words,
                    refusal=state.refusal,
                    transport_error=state.transport_error,
                    transport_error_at=state.transport_error_at,
                )
            )
        return result

    def health(self) -> list[ValueSetHealth]:
        """What argwatch_value_set_{age_seconds,stale,available,version} report."""
        return [
            ValueSetHealth(
                status.config.name,
                status.age_seconds,
                status.stale,
                status.available,
                status.snapshot.version if status.snapshot is not None else -1,
            )
            for status in self.statuses()
        ]

    # ---- copies

    def keep(self, state: SetState) -> RetiredKeep:
        """How much retired history the set keeps (its policy's retired_keep), as of now."""
        config = state.config
        return RetiredKeep(config.retired_keep, config.retired_keep_seconds, self._clock())

    async def install(
        self, state: SetState, payload: SetPayload, confirmed_at: float | None = None, save: bool = True
    ) -> bool:
        """Makes `payload` the set's copy (or only confirms it when it is the version held).

        False when it was refused while built (an over-long value).
        """
        scoped = bool(state.config.scope)
        if payload.scoped is not scoped and len(payload.members):
            # Published per scope for a global set, or bare values for a scoped one (from the owner, a saved
            # copy or the shared cache of a policy that scoped it otherwise): either would be judged wrongly.
            self.refuse(state, "scope_mismatch", payload.incarnation, payload.version)
            return False
        if state.held == (payload.incarnation, payload.version):
            self.confirm(state, confirmed_at)
            state.loaded.set()
            return True
        # Built a chunk of members at a time with the loop running between chunks: a
        # million-member set must not stop the checks while it is applied.
        try:
            snapshot = await make_snapshot_async(
                payload.name,
                payload.version,
                payload.members,
                payload.retired,
                received_at=self._clock(),
                rules=state.rules,
                retirements=payload.retirements,
                excluded=payload.excluded,
                keep=self.keep(state),
                scoped=scoped,
            )
        except ValueTooLong:
            self.refuse(state, "value_too_long", payload.incarnation, payload.version)
            return False
        except MalformedScope:
            self.refuse(state, "bad_scope", payload.incarnation, payload.version)
            return False
        if (
            state.snapshot is not None
            and state.incarnation == payload.incarnation
            and state.snapshot.version > snapshot.version
        ):
            return True  # a newer copy (of the same run of versions) was installed while this one was built
        state.incarnation = payload.incarnation
        state.replay = None  # a compaction under way was of the copy this one replaces: it is dropped
        self.swap_in(state, snapshot, confirmed_at, save)
        return True

    def compact_soon(self, state: SetState) -> None:
        """Rebuilds the set's layered copy (overlay.py) on a new base in the background; deltas keep being
        layered meanwhile (the caller adds each to `state.replay`) and are replayed over the new base."""
        if state.replay is None and state.snapshot is not None:
            state.replay = []
            self._tasks.spawn(self._compact(state, state.snapshot, state.replay))

    async def _compact(self, state: SetState, layered: ValueSetSnapshot, replay: list[DeltaUpdate]) -> None:
        try:
            compacted = await self._compacted(state, layered, replay)
        finally:
            # However it ended (done, given up, failed, cancelled): the next due delta may start another.
            if state.replay is replay:
                state.replay = None
        # Not held here past the swap: the replaced base is let go by a worker thread (_replace), which must
        # hold its last reference; this frame's would be dropped on the loop, were anything awaited after.
        del layered
        current = state.snapshot
        if compacted is None or current is None or compacted.version != current.version:
            return
        # What the deltas retired, and when, is the current copy's (retired_after, in the order they came).
        made = replace(
            compacted,
            retired=current.retired,
            retirements=current.retirements,
            loose_retired=current.loose_retired,
            received_at=current.received_at,
        )
        del current
        self._release_after_large(compacted)
        self._replace(state, made)
        log.info("value set %s: version %d compacted (%d members)", compacted.name, compacted.version, compacted.size)

    async def _compacted(
        self, state: SetState, layered: ValueSetSnapshot, replay: list[DeltaUpdate]
    ) -> ValueSetSnapshot | None:
        """`layered` rebuilt on a new base, with every delta since replayed over it; None if it cannot be (a
        whole copy replaced the set meanwhile, or the layers passed their hard bound)."""
        try:
            # The layered version is frozen, so it is read a chunk at a time while later deltas layer over it.
            built = await make_snapshot_async(
                layered.name,
                layered.version,
                layered.members,
                received_at=layered.received_at,
                rules=state.rules,
                scoped=layered.scoped,
                background=True,
            )
        except (ValueTooLong, MalformedScope):  # its members were each checked once already: cannot happen
            log.exception("value set %s: compaction failed; the layers stay", layered.name)
            return None
        keep = self.keep(state)
        replayed = 0
        while state.replay is replay:  # else a whole copy came meanwhile: this was of the copy it replaced
            if replayed == len(replay):
                return built
            # A step at a time, the loop running between steps (and the deltas that come meanwhile joining
            # the list): thousands of deltas arrive while a million members are rebuilt.
            step_ends = time.perf_counter() + REPLAY_STEP_SECONDS
            while replayed < len(replay):
                delta = replay[replayed]
                if delta.from_version != built.version:
                    return None  # not the version this follows: never guess
                following = with_delta(built, delta, now=self._clock(), rules=state.rules, keep=keep, min_base=0)
                if following is None:
                    return None  # layers grown past the hard bound meanwhile: the next delta rebuilds in full
                built = following
                replayed += 1
                if time.perf_counter() >= step_ends:
                    break
            await asyncio.sleep(0)
        return None

    def swap_in(
        self, state: SetState, snapshot: ValueSetSnapshot, confirmed_at: float | None = None, save: bool = True
    ) -> None:
        """Makes a built snapshot the set's copy: one reference, then confirmed."""
        self._release_after_large(snapshot)
        self._replace(state, snapshot)
        log.info("value set %s: version %d, %d members", snapshot.name, snapshot.version, snapshot.size)
        self._metrics.value_set_refreshed(snapshot.name, snapshot.size)
        self.confirm(state, confirmed_at)
        state.loaded.set()
        if save and self._snapshot_dir is not None and not state.save_pending:
            state.save_pending = True
            self._tasks.spawn(self._save_soon(state, self._snapshot_dir))

    def _replace(self, state: SetState, snapshot: ValueSetSnapshot) -> None:
        """Makes `snapshot` the set's copy. A large replaced copy is a few packed buffers (packed.py), handed
        back without the GIL (_packed.c) by a worker thread here, if nothing else still reads it then: at a
        million members, giving back its pages took milliseconds, which on the loop is a stall."""
        old = state.snapshot
        # A delta's layered copy shares its base with the copy it replaces: nothing large is let go then.
        replaced = (
            [old]
            if old is not None and old.size > PACK_ABOVE and base_members(old) is not base_members(snapshot)
            else []
        )
        del old
        state.snapshot = snapshot
        state.reading = None  # it held the old copy: the next read makes a new one
        if replaced:
            self._tasks.spawn(asyncio.to_thread(replaced.clear))  # the list holds this table's only reference

    def _release_after_large(self, snapshot: ValueSetSnapshot) -> None:
        # A large set arrived as a message of a million strings, freed by now or soon, in pieces too small for
        # malloc to give back by itself: hand them back once the replaced copy is gone too.
        large = snapshot.size > PACK_ABOVE and not isinstance(snapshot.members, OverlaySet)
        if large and not self._release_pending:
            self._release_pending = True
            self._tasks.spawn(self._release_memory_soon())

    async def _release_memory_soon(self) -> None:
        """Once the wire copy and the replaced version are gone, gives the memory they held back to the OS."""
        await asyncio.sleep(RELEASE_AFTER_SECONDS)
        self._release_pending = False
        await asyncio.to_thread(release_free_memory)

    async def _save_soon(self, state: SetState, folder: str) -> None:
        """Saves the latest version, at most once per SAVE_INTERVAL per set (a delta a second on a
        million-member set must not mean a whole-set write a second)."""
        await asyncio.sleep(max(0.0, state.saved_mono + SAVE_INTERVAL_SECONDS - self._monotonic()))
        state.save_pending = False
        state.saved_mono = self._monotonic()
        snapshot = state.snapshot
        if snapshot is None:
            return
        try:
            await asyncio.to_thread(persist.save, folder, snapshot, state.confirmed_at, state.incarnation)
        except OSError as error:
            log.warning("value set %s: cannot save the last good copy: %s", snapshot.name, error)

    async def load_saved(self) -> None:
        """Last-good copies from disk: served as stale, with their real age, until a source confirms them."""
        if self._snapshot_dir is None:
            return
        for state in self.states.values():
            if state.snapshot is not None:
                continue  # carried over from the provider a reload replaces: newer than any saved copy
            saved = await asyncio.to_thread(persist.load, self._snapshot_dir, state.name)
            if saved is None:
                continue
            payload, confirmed_at = saved
            await self.install(state, payload, confirmed_at=confirmed_at, save=False)
            # Stale until its source confirms it (not a failed refresh: nothing was asked yet).
            self.mark_unconfirmed(
                state, StaleCause.SAVED_COPY, "serving the copy saved on disk until its source confirms it"
            )
            log.info(
                "value set %s: version %d loaded from %s (confirmed %.0fs ago)",
                state.name,
                payload.version,
                self._snapshot_dir,
                self._clock() - confirmed_at,
            )

    def carry_over(self, previous: SetTable) -> list[str]:
        """Takes the copies of `previous` (a policy reload's table) for every set configured the same, from the
        same source, with the same normalisations. Returns the sets carried over."""
        carried = []
        for name, state in self.states.items():
            old = previous.states.get(name)
            if (
                old is None
                or old.snapshot is None
                or old.config != state.config
                or set(old.rules) != set(state.rules)
                or previous.policy.sources.get(old.config.source) != self.policy.sources.get(state.config.source)
            ):
                continue
            for attribute in CARRIED_OVER:
                setattr(state, attribute, getattr(old, attribute))
            state.loaded.set()
            carried.append(name)
        for source, up in previous._source_up.items():
            if source in self._source_up and previous.policy.sources.get(source) == self.policy.sources[source]:
                self._source_up[source] = up
        return carried

    # ---- health and cause

    def confirm(self, state: SetState, confirmed_at: float | None = None) -> None:
        """The source vouched for the copy held (now, or at `confirmed_at`)."""
        now = self._clock()
        confirmed_at = now if confirmed_at is None else confirmed_at
        state.confirmed_at = confirmed_at
        state.confirmed_mono = self._monotonic() - max(0.0, now - confirmed_at)
        if not state.healthy and state.cause is not StaleCause.NOT_LOADED:
            log.info("value set %s: confirmed by source %s again", state.name, state.config.source)
            self._events.record("set", state.name, f"fresh again: confirmed by source {state.config.source}")
        state.healthy = True
        state.cause, state.cause_words = StaleCause.NONE, ""

    def mark_unreachable(self, state: SetState, reason: str) -> None:
        """The source could not be reached for this set."""
        if state.healthy:
            log.warning("value set %s: source %s unavailable: %s", state.name, state.config.source, reason)
            self._events.record("set", state.name, f"stale: its source is unreachable: {reason}")
        state.transport_error, state.transport_error_at = reason, self._clock()
        state.transport_error_mono = self._monotonic()
        state.healthy = False
        state.cause, state.cause_words = StaleCause.SOURCE_UNREACHABLE, reason
        self._metrics.value_set_refresh_failed(state.name)

    def mark_unconfirmed(self, state: SetState, cause: StaleCause, words: str) -> None:
        """The set is not confirmed, for a cause other than the transport; logged once per cause."""
        if cause is StaleCause.NOT_SERVED:
            self._metrics.value_set_refresh_failed(state.name)
        if state.cause is not cause and cause is not StaleCause.SAVED_COPY:
            log.warning("value set %s: %s", state.name, words)
            self._events.record("set", state.name, words)
        state.healthy = False
        state.cause, state.cause_words = cause, words
        if cause is StaleCause.NOT_SERVED:
            state.loaded.set()  # the source answered: start-up need not wait for it

    def refuse(
        self,
        state: SetState,
        reason: str,
        incarnation: str,
        version: int | None,
        members: int | None = None,
        *,
        whole_set: bool = True,
    ) -> Refusal:
        """An update the gateway would not take: counted, kept for the record, and the cause of staleness."""
        name, max_members = state.name, state.config.max_members
        detail = refusal_words(reason, members, max_members)
        refusal = state.refusal = Refusal(reason, detail, self._clock(), incarnation, version, whole_set)
        self.count_refusal(name, reason, detail)
        cause = StaleCause.TOO_LARGE if reason in _TOO_LARGE else StaleCause.UPDATE_REFUSED
        held = f"version {state.snapshot.version}" if state.snapshot is not None else "no copy"
        if cause is StaleCause.TOO_LARGE:
            words = f"the owner's version {version} is too large ({detail}); serving {held} until it publishes another"
        else:
            words = f"the source's version {version} was refused ({detail}); serving {held}"
        state.healthy = False
        state.cause, state.cause_words = cause, words
        state.loaded.set()  # the source answered (with something refused): start-up need not wait for it
        self._events.record("set", name, words)
        return refusal

    def count_refusal(self, name: str, reason: str, detail: str = "") -> None:
        """Logs and counts a refused update (`name` is "_unknown" for an update naming no configured set)."""
        log.warning("value set %s: update refused (%s); keeping the last good copy", name, detail or reason)
        self._metrics.value_set_update_rejected(name, reason)

    def mark_source(self, source: str, up: bool, reason: str) -> None:
        """The source answered (up) or could not be reached (down, with why)."""
        if self._source_up.get(source) != up:
            if up:
                self._up_since[source] = self._monotonic()
            self._events.record("source", source, "connected" if up else f"disconnected: {reason}")
            log.info("source %s %s%s", source, "connected" if up else "disconnected", f": {reason}" if reason else "")
        self._source_up[source] = up
        self._metrics.source_connected_state(source, up)

    def source_up(self, source: str) -> bool:
        return self._source_up.get(source, False)

    def count_resync(self, name: str, reason: str) -> None:
        """A fetch of the whole set because an update did not follow the copy held (or on request)."""
        self._metrics.value_set_resync(name, reason)
