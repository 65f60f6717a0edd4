"""Timing in-process work on a shared machine: the best of several repeats, as timeit advises."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable


async def best_micros(run: Callable[[], Awaitable[object]], calls: int, repeats: int = 5) -> float:
    """Microseconds per call of `run`, the best of `repeats` runs of `calls`: on a shared machine,
    noise only ever adds time, so the fastest run is the closest to the work's own cost."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            await run()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6
