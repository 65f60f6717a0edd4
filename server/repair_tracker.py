"""The repair loop, measured: which rejected (conversation, tool) pairs were repaired, abandoned, or given up on.

A rejection opens a repair for its conversation and tool. A later call of the
same tool in the same conversation that passes closes it as succeeded
(tool_argument_repair_succeeded_total, and the attempts it took); one still
open after `repair.remember` is counted abandoned. Open repairs live in local
memory and, with Redis configured, in the shared cache too, so a retry that
lands on another replica closes the repair there and the opener does not count
it abandoned. Without Redis an allowed call pays one dictionary look-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import NamedTuple

from argwatch.server.metrics import GatewayMetrics
from argwatch.server.shared_cache import SharedCache

_KEY = "argwatch:open-repair:"
SWEEP_SECONDS = 5.0


class OpenRepair(NamedTuple):
    tool_label: str
    attempts: int
    expires_at: float  # epoch seconds


class RepairTracker:
    def __init__(
        self,
        cache: SharedCache,
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
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    async def rejected(self, conversation: str, tool: str, tool_label: str, attempt: int) -> None:
        """A rejection in `conversation` opens (or continues) the repair of `tool`."""
        if not conversation:
            return
        repair = OpenRepair(tool_label, attempt, self._clock() + self._remember)
        self._open[conversation, tool] = repair
        if self._cache.remote_configured:
            await self._cache.set(_KEY + _joined(conversation, tool), repair, ttl=self._remember)

    async def passed(self, conversation: str, tool: str) -> None:
        """A call of `tool` in `conversation` passed every check: closes its open repair, if any, as succeeded."""
        if not conversation:
            return
        key = (conversation, tool)
        repair = self._open.pop(key, None)
        if repair is None and self._cache.remote_configured:
            found = await self._cache.get(_KEY + _joined(conversation, tool))
            repair = found if isinstance(found, OpenRepair) else None
        if repair is None:
            return
        if self._cache.remote_configured:
            await self._cache.delete(_KEY + _joined(conversation, tool))
        self._metrics.repair_succeeded(repair.tool_label, repair.attempts)

    async def sweep(self) -> None:
        """Counts open repairs past their window as abandoned (unless another replica closed them)."""
        now = self._clock()
        for key, repair in list(self._open.items()):
            if repair.expires_at > now:
                continue
            del self._open[key]
            if self._cache.remote_configured:
                still_open = await self._cache.get(_KEY + _joined(*key))
                if still_open is None:
                    continue  # closed on another replica (or expired there: counted by this one only)
                await self._cache.delete(_KEY + _joined(*key))
            self._metrics.repair_abandoned(repair.tool_label)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            await self.sweep()


def _joined(conversation: str, tool: str) -> str:
    return f"{conversation}\0{tool}"
