"""The event loop's longest callback in its own thread's CPU time: the loop's work, not its wait for a core.

A 1 ms ticker measures how long the loop went without turning, which on a
shared 2-core machine also counts the time the loop's thread was ready but
not running (the owner's process, the gRPC threads and the worker threads
want the cores too). CLOCK_THREAD_CPUTIME_ID counts only the time the thread
ran: the longest callback by that clock is the longest the gateway's own work
held the loop. Measured by wrapping asyncio's Handle._run for the duration
(a measuring tool's hook, never in the gateway).
"""

from __future__ import annotations

import asyncio.events
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def longest_callback() -> Iterator[list[float]]:
    """Yields a one-element list holding the longest callback's CPU seconds so far (read it after)."""
    longest = [0.0]
    original = asyncio.events.Handle._run
    clock = time.thread_time

    def timed(handle: asyncio.events.Handle) -> None:
        started = clock()
        original(handle)
        spent = clock() - started
        if spent > longest[0]:
            longest[0] = spent

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield longest
    finally:
        asyncio.events.Handle._run = original  # type: ignore[method-assign]
