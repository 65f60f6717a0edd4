"""The event loop's longest callback in its own thread's CPU time: the loop's work, not its wait for a core.

A 1 ms ticker measures how long the loop went without turning, which on a
shared 2-core machine also counts the time the loop's thread was ready but
not running (the owner's process, the gRPC threads and the worker threads
want the cores too). CLOCK_THREAD_CPUTIME_ID counts only the time the thread
ran: the longest callback by that clock is the longest the gateway's own work
held the loop, as far as the clock tells: on this VM it can read more than
the work (cpu_control.py measures by how much, beside a run). Measured by
wrapping asyncio's Handle._run for the duration (a measuring tool's hook,
never in the gateway).
"""

from __future__ import annotations

import asyncio
import asyncio.events
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Longest:
    """The longest callback so far: its CPU seconds, and what it ran (a task's coroutine, or the callback)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.where = ""
        self.by_name: dict[str, float] = {}  # the longest of each callback that took over a millisecond

    def worst(self, count: int = 3) -> str:
        """The `count` callbacks that took longest, with their CPU milliseconds."""
        ranked = sorted(self.by_name.items(), key=lambda item: -item[1])[:count]
        return ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in ranked)


def _named(handle: asyncio.events.Handle) -> str:
    task = getattr(handle._callback, "__self__", None)  # a task's step is its bound method
    coroutine = task.get_coro() if isinstance(task, asyncio.Task) else None
    return getattr(coroutine, "__qualname__", "") or repr(handle._callback)[:80]


@contextmanager
def longest_callback() -> Iterator[Longest]:
    """Yields the longest callback seen while the block runs (read it after)."""
    longest = Longest()
    original = asyncio.events.Handle._run
    clock = time.thread_time

    def timed(handle: asyncio.events.Handle) -> None:
        started = clock()
        original(handle)
        spent = clock() - started
        if spent > 0.001:
            name = _named(handle)
            longest.by_name[name] = max(spent, longest.by_name.get(name, 0.0))
            if spent > longest.seconds:
                longest.seconds, longest.where = spent, name

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield longest
    finally:
        asyncio.events.Handle._run = original  # type: ignore[method-assign]
