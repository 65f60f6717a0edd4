"""The value-set provider: keeps every set live from its source, and tells the checker how fresh each copy is.

It joins two halves: following the sources (source_follower.py: watch, poll,
pull, reconnect, resync) and holding the sets (set_table.py: the copies, their
health and the cause of staleness), with set_updates.py judging what arrives
between them. The checker's `read` is the table's: no await, no lock, no I/O.
A check against a stale copy is counted; against an unavailable one it fails
open (or closed, per policy). A check that stopped checking never looks like a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping

from argwatch.server.policy.model import Policy
from argwatch.server.sets.payload import SetFetcher
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.state.cache import Cache
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.freshness import RefreshResult
from argwatch.server.valuesets.set_state import SetStatus
from argwatch.server.valuesets.set_table import SetTable
from argwatch.server.valuesets.source_follower import WATCH_IDLE_SECONDS, SourceFollower


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
        self._metrics = metrics
        events = events if events is not None else EventLog(clock)  # the incident timeline
        self._table = SetTable(policy, metrics, events, clock=clock, monotonic=monotonic, snapshot_dir=snapshot_dir)
        self._follower = SourceFollower(
            self._table,
            fetchers,
            shared_cache,
            clock=clock,
            monotonic=monotonic,
            backoff_cap=backoff_cap,
            watch_idle_seconds=watch_idle_seconds,
        )
        # The checker's hot path: the set as it may use it now, or None when it is unavailable. The table's
        # own method, bound here, so a call costs no hop through this class.
        self.read: Callable[[str], SetReading | None] = self._table.read
        self.kept_guard = self._table.kept_guard
        self.publish_health()

    def publish_health(self) -> None:
        """Makes this provider's sets the ones argwatch_value_set_{age_seconds,stale,available,version} report
        (at construction; a reload calls it again on the provider it serves)."""
        self._metrics.watch_value_sets(self._table.health)

    async def start(self, wait_seconds: float) -> list[str]:
        """Starts watching and polling; waits until the source answered for every set, at most `wait_seconds`.

        Returns the sets without a copy by then.
        """
        await self._table.load_saved()
        self._follower.start()
        states = self._table.states
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_seconds):
                await asyncio.gather(*(state.loaded.wait() for state in states.values()))
        return [name for name, state in states.items() if state.snapshot is None]

    def carry_over(self, previous: ValueSetProvider) -> list[str]:
        """Takes the copies of `previous` (a policy reload's provider) for every set configured the same, from
        the same source, with the same normalisations: they serve at once, as fresh or stale as they were, and
        the watch confirms them. Returns the sets carried over."""
        return self._table.carry_over(previous._table)

    async def close(self) -> None:
        await self._follower.close()
        await self._table.close()

    def statuses(self) -> list[SetStatus]:
        """Every configured set, in policy order."""
        return self._table.statuses()

    def last_error(self, name: str) -> str:
        """Why the set is not fresh, in words ("" while it is)."""
        (status,) = [status for status in self.statuses() if status.config.name == name]
        return status.last_error

    async def refresh(self, name: str) -> RefreshResult:
        """Fetches the set from its source now (a manual resync); says what that did."""
        return await self._follower.resync(self._table.states[name], "manual")
