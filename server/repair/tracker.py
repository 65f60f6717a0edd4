"""The repair loop, measured: which rejected (conversation, tool) pairs were repaired, abandoned, or given up on.

A rejection opens a repair for its conversation and tool. A later call of the
same tool in the same conversation that passes closes it as succeeded
(tool_argument_repair_succeeded_total, and the attempts it took); one still
open after `repair.remember` is counted abandoned. Open repairs live in local
memory and, with Redis configured, in the shared cache too, so a retry that
lands on another replica closes the repair there and the opener does not count
it abandoned.

A passing call must not pay a Redis round trip to learn whether some replica
has a repair open for it (with Redis, that trip was every passing call's, and
halved a worker's throughput: bench/h2load.py). So every opening and closing is
announced on CHANNEL, and each replica keeps the set of repairs open anywhere;
a passing call looks there, locally, and asks Redis only for a repair it knows
is open elsewhere. While the announcements cannot be followed (Redis down, not
yet subscribed), passing calls ask Redis as before. A lost announcement costs
the accuracy of the repair counters, never a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

from redis.exceptions import RedisError

from argwatch.common.backoff import backoff_delay
from argwatch.common.tasks import cancel_and_wait
from argwatch.server.state.cache import Cache
from argwatch.server.state.codec import shared_value
from argwatch.server.telemetry.metrics import GatewayMetrics

log = logging.getLogger("argwatch.repairs")

_KEY = "argwatch:open-repair:"
# Open repairs kept on this replica, and repairs known open elsewhere: each keyed by a caller's
# conversation id, so each bounded; past it the oldest goes, counted in argwatch_table_evictions_total.
MAX_OPEN = 50_000
CHANNEL = "argwatch:repairs"
SWEEP_SECONDS = 5.0


@shared_value("open_repair")
class OpenRepair(NamedTuple):
    tool_label: str
    attempts: int
    expires_at: float  # epoch seconds


class RepairTracking(Protocol):
    """What the validator tells of repairs: a rejection opens one, a passing call closes it."""

    async def rejected(self, conversation: str, tool: str, tool_label: str, attempt: int) -> None: ...

    @property
    def may_be_open(self) -> bool:
        """Whether a repair may be open, anywhere: False lets a clean call skip naming its conversation's scope
        (a hash) only to find nothing to close."""
        ...

    async def passed(self, conversation: str, tool: str) -> None: ...

    def open_guard(self) -> dict[tuple[str, str], OpenRepair] | None:
        """The mapping whose emptiness is may_be_open's answer (not may_be_open while it is empty); None when
        a repair may be open whatever it holds (another replica's, with Redis)."""
        ...


# Never written: no repair is tracked, so none is ever open.
_NONE_OPEN: dict[tuple[str, str], OpenRepair] = {}


class NoRepairTracking:
    """Repairs not tracked (an offline replay has no later calls to close them)."""

    may_be_open = False

    def open_guard(self) -> dict[tuple[str, str], OpenRepair] | None:
        return _NONE_OPEN

    async def rejected(self, conversation: str, tool: str, tool_label: str, attempt: int) -> None:
        return None

    async def passed(self, conversation: str, tool: str) -> None:
        return None


class RepairTracker:
    def __init__(
        self,
        cache: Cache,
        metrics: GatewayMetrics,
        remember_seconds: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cache = cache
        self._metrics = metrics
        self._remember = remember_seconds
        self._clock = clock
        self._open: dict[tuple[str, str], OpenRepair] = {}
        # Repairs open on any replica, as announced: joined key -> when it is forgotten (epoch seconds).
        self._open_anywhere: dict[str, float] = {}
        self._following = False  # True while subscribed to the announcements
        self._tasks: list[asyncio.Task[None]] = []

    def remember_for(self, seconds: float) -> None:
        """A reloaded policy's repair.remember, for repairs started from now on."""
        self._remember = seconds

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._sweep_forever())]
        if self._cache.remote_configured:
            self._tasks.append(loop.create_task(self._follow_forever()))

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)

    async def rejected(self, conversation: str, tool: str, tool_label: str, attempt: int) -> None:
        """A rejection in `conversation` opens (or continues) the repair of `tool`."""
        if not conversation:
            return
        repair = OpenRepair(tool_label, attempt, self._clock() + self._remember)
        if (conversation, tool) not in self._open and len(self._open) >= MAX_OPEN:
            del self._open[next(iter(self._open))]  # the oldest opened: dicts keep insertion order
            self._metrics.table_eviction("open_repairs")
        self._open[conversation, tool] = repair
        if self._cache.remote_configured:
            joined = _joined(conversation, tool)
            await self._cache.set(_KEY + joined, repair, ttl=self._remember)
            await self._cache.publish(CHANNEL, "open:" + joined)

    @property
    def may_be_open(self) -> bool:
        """One open here, or any on another replica (with Redis, which this replica may not have heard of)."""
        return bool(self._open) or self._cache.remote_configured

    def open_guard(self) -> dict[tuple[str, str], OpenRepair] | None:
        # The same dict for the tracker's life; whether Redis is configured is fixed at its construction.
        return None if self._cache.remote_configured else self._open

    async def passed(self, conversation: str, tool: str) -> None:
        """A call of `tool` in `conversation` passed every check: closes its open repair, if any, as succeeded."""
        if not conversation:
            return
        key = (conversation, tool)
        repair = self._open.pop(key, None)
        if repair is None and not self._cache.remote_configured:
            return
        joined = _joined(conversation, tool)
        if repair is None:
            if self._following and joined not in self._open_anywhere:
                return  # no replica announced an open repair for it: no Redis round trip
            found = await self._cache.get(_KEY + joined, OpenRepair)
            repair = found if isinstance(found, OpenRepair) else None
            if repair is None:
                return
        self._open_anywhere.pop(joined, None)
        await self._cache.delete(_KEY + joined)
        await self._cache.publish(CHANNEL, "close:" + joined)
        self._metrics.repair_succeeded(repair.tool_label, repair.attempts)

    async def sweep(self) -> None:
        """Counts open repairs past their window as abandoned (unless another replica closed them)."""
        now = self._clock()
        for key, repair in list(self._open.items()):
            if repair.expires_at > now:
                continue
            del self._open[key]
            if self._cache.remote_configured:
                still_open = await self._cache.get(_KEY + _joined(*key), OpenRepair)
                if still_open is None:
                    continue  # closed on another replica (or expired there: counted by this one only)
                await self._cache.delete(_KEY + _joined(*key))
            self._metrics.repair_abandoned(repair.tool_label)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            await self.sweep()
            now = self._clock()
            for joined, forget_at in list(self._open_anywhere.items()):
                if forget_at <= now:
                    del self._open_anywhere[joined]

    async def _follow_forever(self) -> None:
        """Keeps _open_anywhere from the announcements; reconnects with backoff while Redis is away."""
        attempt = 0
        while True:
            pubsub = self._cache.pubsub()
            if pubsub is None:
                return  # no Redis: every repair is on this replica, nothing to follow
            try:
                await pubsub.subscribe(CHANNEL)
                self._following, attempt = True, 0
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    kind, _, joined = message["data"].decode().partition(":")
                    if kind == "open":
                        if joined not in self._open_anywhere and len(self._open_anywhere) >= MAX_OPEN:
                            del self._open_anywhere[next(iter(self._open_anywhere))]
                            self._metrics.table_eviction("open_repairs_elsewhere")
                        self._open_anywhere[joined] = self._clock() + self._remember
                    elif kind == "close":
                        self._open_anywhere.pop(joined, None)
            except (RedisError, OSError) as error:
                log.warning("repairs: cannot follow the open-repair announcements (%s); asking Redis per call", error)
            finally:
                # Announcements may have been missed: ask Redis per call until subscribed again.
                self._following = False
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            attempt += 1
            await asyncio.sleep(backoff_delay(attempt, base=0.2, cap=5.0))


def _joined(conversation: str, tool: str) -> str:
    return f"{conversation}\0{tool}"
