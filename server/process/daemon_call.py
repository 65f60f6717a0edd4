"""Runs a blocking call on a daemon thread of its own, with a deadline: a call that hangs costs only that thread.

`asyncio.to_thread` uses the default executor, whose threads the interpreter
joins at exit: a policy read stuck on a FIFO (or a hung network mount) kept a
gateway alive after SIGTERM had logged "stopped", and held the reload lock
while it waited. Here the caller stops waiting at the deadline (TimeoutError),
whatever is held across the wait is released, and the process can still exit:
the thread is a daemon, and its late result, if any, is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

from argwatch.server.process.gil_handover import handed_over_often

T = TypeVar("T")


async def call_with_deadline(function: Callable[[], T], seconds: float, name: str = "argwatch-call") -> T:
    """`function()` on a daemon thread; TimeoutError after `seconds`, its exception if it raises."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the caller stopped waiting: nobody wants it any more
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = function(), None
        except BaseException as raised:  # handed to the caller, whatever it is
            result, error = None, raised
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the process is stopping
            loop.call_soon_threadsafe(settle, result, error)

    # The loop is not kept waiting for the GIL while the call runs, until its result or the deadline (a call
    # that hangs past it does not keep the interval lowered for the life of the process).
    with handed_over_often():
        threading.Thread(target=run, name=name, daemon=True).start()
        return await asyncio.wait_for(future, seconds)
