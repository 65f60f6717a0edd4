"""A stream's idle deadline kept as a time stamp the handler moves per message, checked by one timer when due."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

REQUEST = "request"
ANSWER = "answer"

# time.perf_counter() reads the clock time.monotonic() reads (CPython on Linux and macOS: CLOCK_MONOTONIC).
_PERF_COUNTER_IS_MONOTONIC = (
    time.get_clock_info("perf_counter").implementation == time.get_clock_info("monotonic").implementation
)


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The loop's clock: time.monotonic itself when the loop's `time` is asyncio's own (which returns it), so
    that a read costs no Python frame; the loop's method otherwise."""
    return time.monotonic if type(loop).time is asyncio.BaseEventLoop.time else loop.time


class IdleWatch:
    """Cancels the stream's task once it has waited `seconds` for a request, or for an answer to be taken.

    Why not `asyncio.timeout` moved per message: each `reschedule` makes a timer and cancels the last,
    three a message, and the loop's heap carries the cancelled ones (measured: several µs a message).
    Here a wait begun costs two stores and at most one clock read; the timer fires once per idle period
    and, when the stream moved since, re-arms at the new deadline. Precision is the same: it closes the
    stream when `seconds` have passed since the wait began, not later.

    The handler sets `waiting` (REQUEST, ANSWER, or None while a call is judged across an await: no
    deadline then) and `since`, on the loop's clock (`clock`, or a perf_counter() reading where
    `perf_counter_is_clock`: one clock read a message fewer); a call judged without an await needs no
    None, as the timer cannot run before the next wait is set. What is waited for is stored, not worked
    out from the stamps: on a coarse clock two stamps can be equal. On CancelledError the handler asks
    `expired()` whether the cancel was this watch's."""

    __slots__ = (
        "_cancelling",
        "_loop",
        "_seconds",
        "_task",
        "_timer",
        "clock",
        "fired",
        "perf_counter_is_clock",
        "since",
        "waiting",
    )

    def __init__(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "an IdleWatch watches the task that made it"
        self._loop = loop
        self._seconds = seconds
        self._task = task
        self._cancelling = task.cancelling()
        self.clock = loop_clock(loop)
        self.perf_counter_is_clock = self.clock is time.monotonic and _PERF_COUNTER_IS_MONOTONIC
        self.waiting: str | None = REQUEST
        self.since = loop.time()
        self.fired = False
        self._timer = loop.call_at(self.since + seconds, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if self.waiting is None:  # a call is being judged: its wait starts when it is answered
            due = now + self._seconds
        else:
            due = self.since + self._seconds
            if now >= due:
                self.fired = True
                self._task.cancel()
                return
        self._timer = self._loop.call_at(due, self._check)

    def expired(self) -> bool:
        """True when the CancelledError being handled is this watch's alone (not the client's, not shutdown's):
        the cancel is then taken back, as `asyncio.timeout` does before raising TimeoutError."""
        return self.fired and self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        self._timer.cancel()
