"""The value-set provider: keeps every set live from its source, and tells the checker how fresh each copy is.

How a set stays live:
- A gRPC source that can stream is watched (WatchValueSets): snapshots replace
  the set, deltas change it, heartbeats confirm the version held. A delta that
  does not follow the version held (a gap, an unknown base), or a heartbeat
  naming a newer version, triggers a full resync with GetValueSet. A broken or
  silent stream is reconnected with exponential backoff and full jitter; the
  source sends snapshots again on connect, so a reconnect is a resync.
- A source that cannot stream (UNIMPLEMENTED, or `watch: false`) is pulled
  every TTL/2, through the shared cache (aiocache) so several replicas do not
  each pull it; a file source is polled every second and re-read when it changed.
- A malformed update (version going backwards, empty name, too many members,
  an over-long value) is refused and counted; the last good copy stays, stale,
  with the refusal as its cause. A heartbeat naming the refused version again
  is not fetched again: the owner must publish another version.
- Every set carries the cause of its staleness (freshness.StaleCause): not
  loaded, source unreachable, update refused, too large, not served, not
  confirmed, saved copy. A cause that is over is never shown as current.

How fresh a copy is (see `read`): confirmed within its TTL and its source
healthy -> fresh; otherwise stale, still used, and every check against it is
counted; older than `max_staleness` -> unavailable, and checks fail open (or
closed, per policy). A check that stopped checking never looks like a pass.

The hot path (`read`) is a dictionary look-up and two comparisons: no await,
no lock, no I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from argwatch.common.backoff import backoff_delay
from argwatch.server.policy.model import FileSourceConfig, GrpcSourceConfig, Normalisation, Policy, ValueSetConfig
from argwatch.server.process.background import cancel_and_wait
from argwatch.server.state.cache import Cache
from argwatch.server.state.codec import shared_value
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.metrics import GatewayMetrics, ValueSetHealth
from argwatch.server.valuesets import persist
from argwatch.server.valuesets.freshness import (
    RefreshOutcome,
    RefreshResult,
    Refusal,
    StaleCause,
    refusal_words,
)
from argwatch.server.valuesets.overlay import OverlaySet, with_delta
from argwatch.server.valuesets.payload import (
    HeartbeatUpdate,
    NotServed,
    OversizedDelta,
    OversizedSnapshot,
    Retirement,
    SetFetcher,
    SetPayload,
    SnapshotUpdate,
    SourceUnavailable,
    Update,
    WatchUnsupported,
)
from argwatch.server.valuesets.release_memory import release_free_memory
from argwatch.server.valuesets.retired import RetiredKeep, ValueTooLong
from argwatch.server.valuesets.sharded import SHARD_ABOVE
from argwatch.server.valuesets.snapshot import SetReading, ValueSetSnapshot, make_snapshot_async
from argwatch.server.valuesets.updates import Verdict, apply_delta, judge_delta, judge_heartbeat, judge_snapshot

log = logging.getLogger("argwatch.valuesets")

SHARED_KEY_PREFIX = "argwatch:valueset:"
FILE_POLL_SECONDS = 1.0
# Last-good copies on disk are rewritten at most this often per set.
SAVE_INTERVAL_SECONDS = 30.0
# A watch stream silent this long is presumed dead and reconnected (sources heartbeat every few seconds).
WATCH_IDLE_SECONDS = 30.0
# A source that was serving and went away is most often restarting (a deploy): for this long after it
# went, reconnects are tried at most QUICK_RECONNECT_CAP apart, so its sets are fresh again within about
# half a second of it serving; a longer outage backs off to the reconnect cap.
QUICK_RECONNECT_WINDOW_SECONDS = 60.0
QUICK_RECONNECT_CAP = 0.5
# After a large set is installed, free memory goes back to the OS this much later: by then
# the update that carried it has been dropped and readers of the replaced version are done.
RELEASE_AFTER_SECONDS = 1.0
# Refusals of a set too large to hold (its cause: TOO_LARGE, "serving the last copy until it publishes another").
_TOO_LARGE = frozenset({"oversized", "too_many_retired", "parts_oversized"})


@shared_value("value_set")
class _Shared(NamedTuple):
    """What the shared cache holds for a pulled set: plain data, a declared shape (Redis holds it as JSON)."""

    name: str
    version: int
    members: tuple[str, ...]
    retired: tuple[str, ...]
    retirements: dict[str, tuple[float | None, str]]
    confirmed_at: float
    incarnation: str = ""

    @classmethod
    def of(cls, payload: SetPayload, installed: ValueSetSnapshot, confirmed_at: float) -> _Shared:
        """What to share of a pulled set: its members as pulled, its retired history as kept (retired_keep)."""
        return cls(
            payload.name,
            payload.version,
            tuple(member for member in payload.members if member not in payload.excluded),
            (),
            {value: tuple(info) for value, info in installed.retirements.items()},  # type: ignore[misc]
            confirmed_at,
            payload.incarnation,
        )

    def payload(self) -> SetPayload:
        retirements = {value: Retirement(*info) for value, info in self.retirements.items()}
        return SetPayload(
            self.name,
            self.version,
            self.members,
            self.retired,
            MappingProxyType(retirements),
            incarnation=self.incarnation,
        )


@dataclass(eq=False)
class _SetState:
    """Everything the provider knows of one set. Owned by the event loop; the snapshot inside is immutable."""

    config: ValueSetConfig
    rules: tuple[Normalisation, ...]
    snapshot: ValueSetSnapshot | None = None
    incarnation: str = ""  # the owner's run of versions the snapshot belongs to (updates.py)
    confirmed_at: float = 0.0  # wall clock, for reports
    confirmed_mono: float = -math.inf  # monotonic, for ages
    healthy: bool = False  # the source confirmed this set at its last word on it
    cause: StaleCause = StaleCause.NOT_LOADED  # why not healthy (NONE while healthy)
    cause_words: str = "not loaded yet: its source has not answered for it"
    refusal: Refusal | None = None  # the last update refused, kept for the record
    transport_error: str = ""  # the last error reaching the source, kept for the record
    transport_error_at: float = 0.0
    transport_error_mono: float = -math.inf  # the same, monotonic: was it before the source came back?
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    resyncing: bool = False
    save_pending: bool = False
    saved_mono: float = -math.inf
    # The reading handed to the checker, rebuilt only when the snapshot, the
    # confirmation or staleness changes (not once per call).
    reading: SetReading | None = None


@dataclass(frozen=True, slots=True)
class SetStatus:
    """One set's state, for the Admin API."""

    config: ValueSetConfig
    snapshot: ValueSetSnapshot | None
    confirmed_at: float
    age_seconds: float
    stale: bool
    available: bool
    source_connected: bool
    cause: StaleCause
    last_error: str  # the cause in words; "" while fresh
    refusal: Refusal | None
    transport_error: str
    transport_error_at: float


class ValueSetProvider:
    """Keeps the policy's value sets live; see the module docstring."""

    def __init__(
        self,
        policy: Policy,
        fetchers: Mapping[str, SetFetcher],
        shared_cache: Cache,  # memory by default, Redis for several replicas
        metrics: GatewayMetrics,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        backoff_cap: float = 10.0,
        watch_idle_seconds: float = WATCH_IDLE_SECONDS,
        snapshot_dir: str | None = None,
        events: EventLog | None = None,
    ) -> None:
        self._policy = policy
        self._events = events if events is not None else EventLog(clock)  # the incident timeline
        self._fetchers = fetchers
        self._shared = shared_cache
        self._metrics = metrics
        self._clock = clock
        self._monotonic = monotonic
        self._backoff_cap = backoff_cap
        self._watch_idle = watch_idle_seconds
        self._snapshot_dir = snapshot_dir
        rules = _rules_by_set(policy)
        self._states = {name: _SetState(config, rules.get(name, ())) for name, config in policy.value_sets.items()}
        self._source_up: dict[str, bool] = {name: False for name in policy.sources}
        self._up_since: dict[str, float] = {}  # when each source last went from down to up (monotonic)
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._release_pending = False  # a release of free memory is scheduled (after a large set)
        self._outage_logged: dict[str, float] = {}
        self.publish_health()

    def publish_health(self) -> None:
        """Makes this provider's sets the ones argwatch_value_set_{age_seconds,stale,available,version} report
        (at construction; a reload calls it again on the provider it serves)."""
        self._metrics.watch_value_sets(self._health)

    # ---- lifecycle

    async def start(self, wait_seconds: float) -> list[str]:
        """Starts watching and polling; waits until the source answered for every set, at most `wait_seconds`.

        Returns the sets without a copy by then.
        """
        if self._snapshot_dir is not None:
            await self._load_saved(self._snapshot_dir)
        by_source: dict[str, list[_SetState]] = {}
        for state in self._states.values():
            by_source.setdefault(state.config.source, []).append(state)
        for source, states in by_source.items():
            config = self._policy.sources[source]
            if isinstance(config, GrpcSourceConfig) and config.watch and hasattr(self._fetchers[source], "watch"):
                self._spawn(self._watch_source(source, states))
            else:
                interval = FILE_POLL_SECONDS if isinstance(config, FileSourceConfig) else None
                for state in states:
                    self._spawn(self._poll_set(state, interval))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_seconds):
                await asyncio.gather(*(state.loaded.wait() for state in self._states.values()))
        return [name for name, state in self._states.items() if state.snapshot is None]

    async def _load_saved(self, folder: str) -> None:
        """Last-good copies from disk: served as stale, with their real age, until a source confirms them."""
        for state in self._states.values():
            if state.snapshot is not None:
                continue  # carried over from the provider a reload replaces: newer than any saved copy
            saved = await asyncio.to_thread(persist.load, folder, state.config.name)
            if saved is None:
                continue
            payload, confirmed_at = saved
            await self._install(state, payload, confirmed_at=confirmed_at, persist_copy=False)
            # Stale until its source confirms it (not a failed refresh: nothing was asked yet).
            self._not_healthy(
                state, StaleCause.SAVED_COPY, "serving the copy saved on disk until its source confirms it"
            )
            log.info(
                "value set %s: version %d loaded from %s (confirmed %.0fs ago)",
                state.config.name,
                payload.version,
                folder,
                self._clock() - confirmed_at,
            )

    def carry_over(self, previous: ValueSetProvider) -> list[str]:
        """Takes the copies of `previous` (a policy reload's provider) for every set configured the same, from
        the same source, with the same normalisations: they serve at once, as fresh or stale as they were, and
        the watch confirms them. Returns the sets carried over."""
        carried = []
        for name, state in self._states.items():
            old = previous._states.get(name)
            if (
                old is None
                or old.snapshot is None
                or old.config != state.config
                or set(old.rules) != set(state.rules)
                or previous._policy.sources.get(old.config.source) != self._policy.sources.get(state.config.source)
            ):
                continue
            for attribute in (
                "snapshot", "incarnation", "confirmed_at", "confirmed_mono", "healthy", "cause", "cause_words",
                "refusal", "transport_error", "transport_error_at",
            ):  # fmt: skip
                setattr(state, attribute, getattr(old, attribute))
            state.loaded.set()
            carried.append(name)
        for source, up in previous._source_up.items():
            if source in self._source_up and previous._policy.sources.get(source) == self._policy.sources[source]:
                self._source_up[source] = up
        return carried

    async def close(self) -> None:
        self._closing = True  # loops also check this, so no lost cancellation can keep one alive
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        await asyncio.gather(*(fetcher.close() for fetcher in self._fetchers.values()))

    # ---- the hot path

    def read(self, name: str) -> SetReading | None:
        """The set as the checker may use it now, or None when it is unavailable."""
        state = self._states.get(name)
        if state is None or state.snapshot is None:
            return None
        age = self._monotonic() - state.confirmed_mono
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
        return reading

    # ---- reports

    def statuses(self) -> list[SetStatus]:
        """Every configured set, in policy order."""
        now = self._monotonic()
        result = []
        for state in self._states.values():
            reading = self.read(state.config.name)
            age = now - state.confirmed_mono if state.snapshot is not None else math.inf
            connected = self._source_up.get(state.config.source, False)
            # When the source came back (-inf: it has not, or never went away while this set was known).
            back_since = self._up_since.get(state.config.source, -math.inf) if connected else -math.inf
            cause, words = self._cause(state, reading, age, back_since)
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

    @staticmethod
    def _cause(state: _SetState, reading: SetReading | None, age: float, back_since: float) -> tuple[StaleCause, str]:
        """Why the copy is not fresh now, and in words; (NONE, "") while it is."""
        if reading is not None and not reading.stale:
            return StaleCause.NONE, ""
        if state.healthy:
            if reading is None and state.snapshot is not None:
                return StaleCause.NOT_CONFIRMED, (
                    f"not confirmed for {age:.0f}s, over max_staleness {state.config.max_staleness_seconds:g}s"
                )
            return StaleCause.NOT_CONFIRMED, f"not confirmed for {age:.0f}s, over its TTL {state.config.ttl_seconds:g}s"
        if state.cause is StaleCause.SOURCE_UNREACHABLE and state.transport_error_mono < back_since:
            # The source came back after this set's error; the set has not been confirmed since. The error
            # is over. (An error of this set's own since then, such as a resync timing out while the stream
            # is up, is still the cause.)
            return StaleCause.NOT_CONFIRMED, "its source is back and has not confirmed it yet"
        return state.cause, state.cause_words

    def last_error(self, name: str) -> str:
        """Why the set is not fresh, in words ("" while it is)."""
        (status,) = [status for status in self.statuses() if status.config.name == name]
        return status.last_error

    async def refresh(self, name: str) -> RefreshResult:
        """Fetches the set from its source now (a manual resync); says what that did."""
        return await self._resync(self._states[name], "manual")

    # ---- watching

    async def _watch_source(self, source: str, states: list[_SetState]) -> None:
        fetcher: Any = self._fetchers[source]
        by_name = {state.config.name: state for state in states}
        attempt = 0
        lost_at: float | None = None  # when the source last went away (monotonic), None while connected
        while not self._closing:
            stream = fetcher.watch(list(by_name))
            try:
                while True:
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
                    # that races with a message, and this loop would then outlive close().
                    async with asyncio.timeout(self._watch_idle):
                        update = await anext(stream)
                    if attempt or not self._source_up[source]:
                        attempt, lost_at = 0, None
                        self._set_source(source, True, "")
                    await self._apply(source, update, by_name)
                    del update  # not held while waiting for the next one: a snapshot's wire copy is large
            except WatchUnsupported:
                log.info("source %s cannot stream (UNIMPLEMENTED): pulling its sets every TTL/2", source)
                for state in states:
                    self._spawn(self._poll_set(state, None))
                return
            except StopAsyncIteration:
                reason = "the stream ended"
            except TimeoutError:
                reason = f"no message for {self._watch_idle:g}s"
            except SourceUnavailable as error:
                reason = str(error)
            finally:
                await stream.aclose()
            self._set_source(source, False, reason)
            for state in states:
                self._unhealthy(state, reason)
            attempt += 1
            now = self._monotonic()
            lost_at = now if lost_at is None else lost_at
            cap = self._backoff_cap
            if now - lost_at < QUICK_RECONNECT_WINDOW_SECONDS:
                cap = min(cap, QUICK_RECONNECT_CAP)
            delay = backoff_delay(attempt, cap=cap)
            self._log_outage(source, attempt, reason, delay)
            await asyncio.sleep(delay)

    async def _apply(self, source: str, update: Update, by_name: Mapping[str, _SetState]) -> None:
        if isinstance(update, HeartbeatUpdate):
            for name, state in by_name.items():
                version = update.versions.get(name)
                if version is None:
                    # The heartbeat lists every watched set the source serves (sources.proto).
                    self._not_healthy(state, StaleCause.NOT_SERVED, f"source {source} does not serve it")
                    continue
                held = state.snapshot is not None and (state.incarnation, state.snapshot.version) == (
                    update.incarnation,
                    version,
                )
                if not held and state.refusal is not None and state.refusal.names(update.incarnation, version):
                    continue  # still the set refused: fetching it again would be refused again
                judged = judge_heartbeat(version, state.snapshot, update.incarnation, state.incarnation)
                if judged.verdict is Verdict.APPLY:
                    self._confirm(state)
                elif judged.verdict is Verdict.RESYNC:
                    self._spawn_resync(state, judged.reason)
                else:
                    self._refused(state, judged.reason, update.incarnation, version)
            return
        name = update.payload.name if isinstance(update, SnapshotUpdate) else update.name
        found = by_name.get(name)
        if found is None:
            self._rejected("_unknown", "empty_name" if not name else "unknown_set")
            return
        state = found
        if isinstance(update, OversizedSnapshot):  # refused part by part, as it arrived (grpc_source.py)
            self._refused(state, "parts_oversized", update.incarnation, update.version, update.members)
            return
        if isinstance(update, OversizedDelta):  # too many values for one delta: the set is fetched whole
            self._refused(state, "oversized_delta", update.incarnation, update.to_version, whole_set=False)
            self._spawn_resync(state, "delta_refused")
            return
        if isinstance(update, SnapshotUpdate):
            payload = update.payload
            judged = judge_snapshot(payload, state.snapshot, state.config.max_members, state.incarnation)
            if judged.verdict is Verdict.APPLY:
                await self._install(state, payload)
            else:
                self._refused(state, judged.reason, payload.incarnation, payload.version, len(payload.members))
            return
        judged = judge_delta(update, state.snapshot, state.config.max_members, state.incarnation)
        if judged.verdict is Verdict.APPLY:
            assert state.snapshot is not None
            layered = with_delta(state.snapshot, update, now=self._clock(), rules=state.rules, keep=self._keep(state))
            if layered is not None:  # O(delta): layers over the current tables
                self._installed(state, layered)
            else:  # a small set, or layers grown large: re-index in full (in chunks)
                await self._install(state, apply_delta(state.snapshot, update, self._clock()))
        elif judged.verdict is Verdict.RESYNC:
            self._spawn_resync(state, judged.reason)
        elif judged.verdict is Verdict.REJECT:
            self._refused(state, judged.reason, update.incarnation, update.to_version, whole_set=False)
            if judged.reason == "oversized":
                # The delta is refused; the set it leads to is the owner's to judge whole: fetch it.
                self._spawn_resync(state, "delta_refused")

    def _keep(self, state: _SetState) -> RetiredKeep:
        config = state.config
        return RetiredKeep(config.retired_keep, config.retired_keep_seconds, self._clock())

    def _spawn_resync(self, state: _SetState, reason: str) -> None:
        if not state.resyncing:
            self._spawn(self._resync(state, reason))

    async def _resync(self, state: _SetState, reason: str) -> RefreshResult:
        """A full fetch straight from the source (not the shared cache: we know we are behind)."""
        state.resyncing = True
        self._metrics.value_set_resync(state.config.name, reason)
        try:
            payload = await self._fetchers[state.config.source].fetch(state.config.name)
        except NotServed as error:
            self._not_healthy(state, StaleCause.NOT_SERVED, str(error))
            return RefreshResult(RefreshOutcome.NOT_SERVED, str(error))
        except SourceUnavailable as error:
            self._unhealthy(state, str(error))
            return RefreshResult(RefreshOutcome.UNREACHABLE, str(error))
        finally:
            state.resyncing = False
        return await self._take(state, payload)

    async def _take(self, state: _SetState, payload: SetPayload) -> RefreshResult:
        """Judges and installs a whole set a source answered with; says what that did."""
        before = (state.incarnation, state.snapshot.version) if state.snapshot is not None else None
        judged = judge_snapshot(payload, state.snapshot, state.config.max_members, state.incarnation)
        if judged.verdict is not Verdict.APPLY:
            refusal = self._refused(state, judged.reason, payload.incarnation, payload.version, len(payload.members))
            return RefreshResult(RefreshOutcome.REFUSED, refusal.detail)
        if not await self._install(state, payload):
            assert state.refusal is not None
            return RefreshResult(RefreshOutcome.REFUSED, state.refusal.detail)
        if before == (payload.incarnation, payload.version):
            return RefreshResult(RefreshOutcome.CONFIRMED, f"version {payload.version} confirmed")
        held = "nothing" if before is None else f"version {before[1]}"
        size = state.snapshot.size if state.snapshot is not None else 0
        return RefreshResult(RefreshOutcome.NEW_VERSION, f"{held} -> version {payload.version} ({size} members)")

    # ---- polling

    async def _poll_set(self, state: _SetState, interval: float | None) -> None:
        """Pulls the set now and then every `interval` (TTL/2 with jitter when None), backing off on failure."""
        failures = 0
        while not self._closing:
            if await self._pull(state):
                failures = 0
                delay = interval if interval is not None else state.config.ttl_seconds / 2 * random.uniform(0.9, 1.1)
            else:
                failures += 1
                regular = interval if interval is not None else state.config.ttl_seconds / 2
                delay = min(regular, max(0.05, backoff_delay(failures, cap=self._backoff_cap)))
            await asyncio.sleep(delay)

    async def _pull(self, state: _SetState) -> bool:
        config = state.config
        is_file = isinstance(self._policy.sources[config.source], FileSourceConfig)
        if not is_file:
            shared = await self._shared_get(config.name)
            # Another replica pulled it recently: use that instead of asking the source again.
            if (
                shared is not None
                and self._clock() - shared.confirmed_at < config.ttl_seconds / 2
                and (
                    state.snapshot is None
                    or shared.incarnation != state.incarnation
                    or shared.version >= state.snapshot.version
                )
            ):
                await self._install(state, shared.payload(), confirmed_at=shared.confirmed_at)
                self._set_source(config.source, True, "")
                return True
        try:
            payload = await self._fetchers[config.source].fetch(config.name)
        except NotServed as error:
            # The source answered (it is up); it has no such set. Not a disconnection to log every second.
            self._set_source(config.source, True, "")
            self._not_healthy(state, StaleCause.NOT_SERVED, str(error))
            return True
        except SourceUnavailable as error:
            self._set_source(config.source, False, str(error))
            self._unhealthy(state, str(error))
            return False
        except Exception as error:  # a source bug must not stop the refresher; it is counted
            log.exception("value set %s: unexpected error from source %s", config.name, config.source)
            self._unhealthy(state, f"{type(error).__name__}: {error}")
            return False
        self._set_source(config.source, True, "")
        taken = await self._take(state, payload)
        if taken.outcome is RefreshOutcome.REFUSED:
            return True  # the source answered; its answer was bad, and is counted as such
        installed = state.snapshot
        if (
            not is_file
            and installed is not None
            and (installed.version, state.incarnation) == (payload.version, payload.incarnation)
        ):  # a newer copy installed meanwhile is not this one's history: then nothing is shared this time
            shared = _Shared.of(payload, installed, state.confirmed_at)
            await self._shared.set(SHARED_KEY_PREFIX + config.name, shared, config.ttl_seconds)
        return True

    async def _shared_get(self, name: str) -> _Shared | None:
        # The shared cache bounds and counts its own failures (shared_cache.SharedCache).
        found = await self._shared.get(SHARED_KEY_PREFIX + name, _Shared)
        if not isinstance(found, _Shared) or found.name != name or found.confirmed_at > self._clock() + 60:
            return None  # not this set, or confirmed in the future (which would pin it fresh): not ours
        return found

    # ---- state changes

    async def _install(
        self, state: _SetState, payload: SetPayload, confirmed_at: float | None = None, persist_copy: bool = True
    ) -> bool:
        """Makes `payload` the set's copy (or only confirms it when it is the version held).

        False when it was refused while built (an over-long value).
        """
        current = state.snapshot
        another_run = payload.incarnation != state.incarnation  # the owner restarted its versions
        if current is None or another_run or payload.version != current.version:
            # Built CHUNK members at a time with the loop running between chunks: a
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
                    keep=self._keep(state),
                )
            except ValueTooLong:
                self._refused(state, "value_too_long", payload.incarnation, payload.version)
                return False
            if (
                state.snapshot is not None
                and state.incarnation == payload.incarnation
                and state.snapshot.version > snapshot.version
            ):
                return True  # a newer copy (of the same run of versions) was installed while this one was built
            state.incarnation = payload.incarnation
            self._installed(state, snapshot, confirmed_at, persist_copy)
            return True
        self._confirm(state, confirmed_at)
        state.loaded.set()
        return True

    def _installed(
        self,
        state: _SetState,
        snapshot: ValueSetSnapshot,
        confirmed_at: float | None = None,
        persist_copy: bool = True,
    ) -> None:
        if snapshot.size > SHARD_ABOVE and not isinstance(snapshot.members, OverlaySet):
            # A freshly built large set is millions of tracked objects (set and dict tables) that
            # every full collection would traverse again: ~60-90 ms stalls at 1M members, at
            # random. Snapshots hold no reference cycles, so reference counting frees them when
            # replaced; moving them out of the cycle collector's sight costs nothing.
            gc.freeze()
            if not self._release_pending:
                self._release_pending = True
                self._spawn(self._release_memory_soon())
        state.snapshot = snapshot
        log.info("value set %s: version %d, %d members", snapshot.name, snapshot.version, snapshot.size)
        self._metrics.value_set_refreshed(snapshot.name, snapshot.size)
        self._confirm(state, confirmed_at)
        state.loaded.set()
        if persist_copy and self._snapshot_dir is not None and not state.save_pending:
            state.save_pending = True
            self._spawn(self._save_soon(state, self._snapshot_dir))

    async def _release_memory_soon(self) -> None:
        """Once the wire copy and the replaced version are gone, gives the memory they held back to the OS."""
        await asyncio.sleep(RELEASE_AFTER_SECONDS)
        self._release_pending = False
        await asyncio.to_thread(release_free_memory)

    async def _save_soon(self, state: _SetState, folder: str) -> None:
        """Saves the latest version, at most once per SAVE_INTERVAL per set (a delta a second on a
        million-member set must not mean a 20 MB write a second)."""
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

    def _confirm(self, state: _SetState, confirmed_at: float | None = None) -> None:
        now = self._clock()
        confirmed_at = now if confirmed_at is None else confirmed_at
        state.confirmed_at = confirmed_at
        state.confirmed_mono = self._monotonic() - max(0.0, now - confirmed_at)
        if not state.healthy and state.cause is not StaleCause.NOT_LOADED:
            log.info("value set %s: confirmed by source %s again", state.config.name, state.config.source)
            self._events.record("set", state.config.name, f"fresh again: confirmed by source {state.config.source}")
        state.healthy = True
        state.cause, state.cause_words = StaleCause.NONE, ""

    def _log_outage(self, source: str, attempt: int, reason: str, delay: float) -> None:
        """The first failure at WARNING, then a reminder at most once a minute: an outage must not flood the log."""
        now = self._monotonic()
        if attempt == 1 or now - self._outage_logged.get(source, -math.inf) >= 60.0:
            self._outage_logged[source] = now
            log.warning("source %s: watch lost (%s); attempt %d, reconnecting in %.2fs", source, reason, attempt, delay)
        else:
            log.debug("source %s: reconnect attempt %d failed (%s)", source, attempt, reason)

    def _unhealthy(self, state: _SetState, reason: str) -> None:
        """The source could not be reached for this set."""
        if state.healthy:
            log.warning("value set %s: source %s unavailable: %s", state.config.name, state.config.source, reason)
            self._events.record("set", state.config.name, f"stale: its source is unreachable: {reason}")
        state.transport_error, state.transport_error_at = reason, self._clock()
        state.transport_error_mono = self._monotonic()
        state.healthy = False
        state.cause, state.cause_words = StaleCause.SOURCE_UNREACHABLE, reason
        self._metrics.value_set_refresh_failed(state.config.name)

    def _not_healthy(self, state: _SetState, cause: StaleCause, words: str) -> None:
        """The set is not confirmed, for a cause other than the transport; logged once per cause."""
        if cause is StaleCause.NOT_SERVED:
            self._metrics.value_set_refresh_failed(state.config.name)
        if state.cause is not cause and cause is not StaleCause.SAVED_COPY:
            log.warning("value set %s: %s", state.config.name, words)
            self._events.record("set", state.config.name, words)
        state.healthy = False
        state.cause, state.cause_words = cause, words
        if cause is StaleCause.NOT_SERVED:
            state.loaded.set()  # the source answered: start-up need not wait for it

    def _refused(
        self,
        state: _SetState,
        reason: str,
        incarnation: str,
        version: int | None,
        members: int | None = None,
        *,
        whole_set: bool = True,
    ) -> Refusal:
        """An update the gateway would not take: counted, kept for the record, and the cause of staleness."""
        name, max_members = state.config.name, state.config.max_members
        detail = refusal_words(reason, members, max_members)
        refusal = state.refusal = Refusal(reason, detail, self._clock(), incarnation, version, whole_set)
        self._rejected(name, reason, detail)
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

    def _rejected(self, name: str, reason: str, detail: str = "") -> None:
        log.warning("value set %s: update refused (%s); keeping the last good copy", name, detail or reason)
        self._metrics.value_set_update_rejected(name, reason)

    def _set_source(self, source: str, up: bool, reason: str) -> None:
        if self._source_up.get(source) != up:
            if up:
                self._up_since[source] = self._monotonic()
            self._events.record("source", source, "connected" if up else f"disconnected: {reason}")
            log.info("source %s %s%s", source, "connected" if up else "disconnected", f": {reason}" if reason else "")
        self._source_up[source] = up
        self._metrics.source_connected_state(source, up)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.append(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks and task.done() and not task.cancelled():
            self._tasks.remove(task)
            if task.exception() is not None:
                log.error("value-set task failed", exc_info=task.exception())

    def _health(self) -> list[ValueSetHealth]:
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


def _rules_by_set(policy: Policy) -> dict[str, tuple[Normalisation, ...]]:
    rules: dict[str, set[Normalisation]] = {}
    for tool in policy.tools.values():
        for binding in tool.arguments:
            rules.setdefault(binding.value_set, set()).add(binding.normalisation)
    return {name: tuple(found) for name, found in rules.items()}
