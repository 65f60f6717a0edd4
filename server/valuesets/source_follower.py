"""Following the sources: watch a stream, or pull on a timer; reconnect with backoff; resync when behind.

- A gRPC source that can stream is watched (WatchValueSets): snapshots replace
  the set, deltas change it, heartbeats confirm the version held. A delta that
  does not follow the version held (a gap, an unknown base), or a heartbeat
  naming a newer version, triggers a full resync with GetValueSet. A broken or
  silent stream is reconnected with exponential backoff and full jitter; the
  source sends snapshots again on connect, so a reconnect is a resync.
- A source that cannot stream (UNIMPLEMENTED, or `watch: false`) is pulled
  every TTL/2, through the shared cache so several replicas do not each pull
  it; a file source is polled every second and re-read when it changed.

What arrives is judged and applied by set_updates.py, into set_table.py.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Mapping

from argwatch.common.backoff import backoff_delay
from argwatch.common.tasks import TaskSet
from argwatch.server.policy.model import FileSourceConfig, GrpcSourceConfig
from argwatch.server.sets.payload import NotServed, SetFetcher, SetWatcher, SourceUnavailable, WatchUnsupported
from argwatch.server.state.cache import Cache
from argwatch.server.valuesets.freshness import RefreshOutcome, RefreshResult, StaleCause
from argwatch.server.valuesets.set_state import SetState
from argwatch.server.valuesets.set_table import SetTable
from argwatch.server.valuesets.set_updates import SetUpdates
from argwatch.server.valuesets.shared_copy import SHARED_KEY_PREFIX, SharedCopy

log = logging.getLogger("argwatch.valuesets")

FILE_POLL_SECONDS = 1.0
# A watch stream silent this long is presumed dead and reconnected (sources heartbeat every few seconds).
WATCH_IDLE_SECONDS = 30.0
# A source that was serving and went away is most often restarting (a deploy): for this long after it
# went, reconnects are tried at most QUICK_RECONNECT_CAP apart, so its sets are fresh again within about
# half a second of it serving; a longer outage backs off to the reconnect cap.
QUICK_RECONNECT_WINDOW_SECONDS = 60.0
QUICK_RECONNECT_CAP = 0.5
# An outage is logged at WARNING when it starts, then reminded at most this often.
OUTAGE_REMINDER_SECONDS = 60.0


class SourceFollower:
    """Keeps the table's sets following their sources; see the module docstring."""

    def __init__(
        self,
        table: SetTable,
        fetchers: Mapping[str, SetFetcher],
        shared_cache: Cache,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        backoff_cap: float,
        watch_idle_seconds: float,
    ) -> None:
        self._table = table
        self._fetchers = fetchers
        self._shared = shared_cache
        self._clock = clock
        self._monotonic = monotonic
        self._backoff_cap = backoff_cap
        self._watch_idle = watch_idle_seconds
        self.updates = SetUpdates(table, self.resync_soon, clock)
        self._tasks = TaskSet(log, "value-set source")
        self._closing = False
        self._outage_logged: dict[str, float] = {}

    def start(self) -> None:
        """Watches every source that can stream; polls every set of the others."""
        policy = self._table.policy
        by_source: dict[str, list[SetState]] = {}
        for state in self._table.states.values():
            by_source.setdefault(state.config.source, []).append(state)
        for source, states in by_source.items():
            config, fetcher = policy.sources[source], self._fetchers[source]
            if isinstance(config, GrpcSourceConfig) and config.watch and isinstance(fetcher, SetWatcher):
                self._tasks.spawn(self._watch(source, fetcher, states))
            else:
                interval = FILE_POLL_SECONDS if isinstance(config, FileSourceConfig) else None
                for state in states:
                    self._tasks.spawn(self._poll(state, interval))

    async def close(self) -> None:
        self._closing = True  # loops also check this, so no lost cancellation can keep one alive
        await self._tasks.cancel_all()
        await asyncio.gather(*(fetcher.close() for fetcher in self._fetchers.values()))

    # ---- watching

    async def _watch(self, source: str, fetcher: SetWatcher, states: list[SetState]) -> None:
        table = self._table
        by_name = {state.name: state for state in states}
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
                    if attempt or not table.source_up(source):
                        attempt, lost_at = 0, None
                        table.mark_source(source, True, "")
                    await self.updates.take_update(source, update, by_name)
                    del update  # not held while waiting for the next one: a snapshot's wire copy is large
            except WatchUnsupported:
                log.info("source %s cannot stream (UNIMPLEMENTED): pulling its sets every TTL/2", source)
                for state in states:
                    self._tasks.spawn(self._poll(state, None))
                return
            except StopAsyncIteration:
                reason = "the stream ended"
            except TimeoutError:
                reason = f"no message for {self._watch_idle:g}s"
            except SourceUnavailable as error:
                reason = str(error)
            finally:
                await stream.aclose()
            table.mark_source(source, False, reason)
            for state in states:
                table.mark_unreachable(state, reason)
            attempt += 1
            now = self._monotonic()
            lost_at = now if lost_at is None else lost_at
            cap = self._backoff_cap
            if now - lost_at < QUICK_RECONNECT_WINDOW_SECONDS:
                cap = min(cap, QUICK_RECONNECT_CAP)
            delay = backoff_delay(attempt, cap=cap)
            self._log_outage(source, attempt, reason, delay)
            await asyncio.sleep(delay)

    def _log_outage(self, source: str, attempt: int, reason: str, delay: float) -> None:
        """The first failure at WARNING, then a reminder at most once a minute: an outage must not flood the log."""
        now = self._monotonic()
        if attempt == 1 or now - self._outage_logged.get(source, -math.inf) >= OUTAGE_REMINDER_SECONDS:
            self._outage_logged[source] = now
            log.warning("source %s: watch lost (%s); attempt %d, reconnecting in %.2fs", source, reason, attempt, delay)
        else:
            log.debug("source %s: reconnect attempt %d failed (%s)", source, attempt, reason)

    # ---- resyncing

    def resync_soon(self, state: SetState, reason: str) -> None:
        """Fetches the set whole in the background, unless a fetch of it is already under way."""
        if not state.resyncing:
            self._tasks.spawn(self._resync_quietly(state, reason))

    async def _resync_quietly(self, state: SetState, reason: str) -> None:
        """A resync whose result is the set's state (a background task has no one to tell)."""
        await self.resync(state, reason)

    async def resync(self, state: SetState, reason: str) -> RefreshResult:
        """A full fetch straight from the source (not the shared cache: we know we are behind)."""
        state.resyncing = True
        self._table.count_resync(state.name, reason)
        try:
            payload = await self._fetchers[state.config.source].fetch(state.name)
        except NotServed as error:
            self._table.mark_unconfirmed(state, StaleCause.NOT_SERVED, str(error))
            return RefreshResult(RefreshOutcome.NOT_SERVED, str(error))
        except SourceUnavailable as error:
            self._table.mark_unreachable(state, str(error))
            return RefreshResult(RefreshOutcome.UNREACHABLE, str(error))
        finally:
            state.resyncing = False
        return await self.updates.take_whole(state, payload)

    # ---- polling

    async def _poll(self, state: SetState, interval: float | None) -> None:
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

    async def _pull(self, state: SetState) -> bool:
        """One pull of the set (from the shared cache when another replica pulled it lately); False on failure."""
        table, config = self._table, state.config
        is_file = isinstance(table.policy.sources[config.source], FileSourceConfig)
        if not is_file:
            shared = await self._shared_copy(config.name)
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
                await table.install(state, shared.payload(), confirmed_at=shared.confirmed_at)
                table.mark_source(config.source, True, "")
                return True
        try:
            payload = await self._fetchers[config.source].fetch(config.name)
        except NotServed as error:
            # The source answered (it is up); it has no such set. Not a disconnection to log every second.
            table.mark_source(config.source, True, "")
            table.mark_unconfirmed(state, StaleCause.NOT_SERVED, str(error))
            return True
        except SourceUnavailable as error:
            table.mark_source(config.source, False, str(error))
            table.mark_unreachable(state, str(error))
            return False
        except Exception as error:  # a source bug must not stop the refresher; it is counted
            log.exception("value set %s: unexpected error from source %s", config.name, config.source)
            table.mark_unreachable(state, f"{type(error).__name__}: {error}")
            return False
        table.mark_source(config.source, True, "")
        taken = await self.updates.take_whole(state, payload)
        if taken.outcome is RefreshOutcome.REFUSED:
            return True  # the source answered; its answer was bad, and is counted as such
        installed = state.snapshot
        if not is_file and installed is not None and state.held == (payload.incarnation, payload.version):
            # A newer copy installed meanwhile is not this one's history: then nothing is shared this time.
            shared = SharedCopy.of(payload, installed, state.confirmed_at)
            await self._shared.set(SHARED_KEY_PREFIX + config.name, shared, config.ttl_seconds)
        return True

    async def _shared_copy(self, name: str) -> SharedCopy | None:
        # The shared cache bounds and counts its own failures (shared_cache.SharedCache).
        found = await self._shared.get(SHARED_KEY_PREFIX + name, SharedCopy)
        if not isinstance(found, SharedCopy) or found.name != name or found.confirmed_at > self._clock() + 60:
            return None  # not this set, or confirmed in the future (which would pin it fresh): not ours
        return found
