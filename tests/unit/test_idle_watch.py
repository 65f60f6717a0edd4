"""A stream's idle watch: it cancels only a wait that lasted its seconds, never a judged call, and never takes
another's cancel for its own."""

from __future__ import annotations

import asyncio
import time

import pytest

from argwatch.server.edge.idle_watch import ANSWER, REQUEST, IdleWatch


async def _idle_for(watch: IdleWatch, seconds: float) -> str:
    """Sleeps `seconds` as a stream waiting for a request; "idle" when the watch closed it, "done" otherwise."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        if not watch.expired():
            raise
        return "idle"
    return "done"


async def test_a_wait_of_its_seconds_is_closed_and_the_cancel_taken_back() -> None:
    async def stream() -> tuple[str, int]:
        watch = IdleWatch(0.05)
        try:
            outcome = await _idle_for(watch, 5.0)
        finally:
            watch.close()
        task = asyncio.current_task()
        assert task is not None
        return outcome, task.cancelling()

    assert await asyncio.wait_for(stream(), 2.0) == ("idle", 0)


async def test_a_stream_that_keeps_moving_is_never_closed() -> None:
    async def stream() -> str:
        watch = IdleWatch(0.1)
        try:
            for _ in range(12):  # 0.36 s in all, each wait 0.03 s: the timer fires and re-arms past each
                watch.waiting, watch.since = REQUEST, watch.clock()
                if await _idle_for(watch, 0.03) == "idle":
                    return "idle"
            return "moving"
        finally:
            watch.close()

    assert await stream() == "moving"


async def test_a_call_being_judged_has_no_deadline_and_the_answer_wait_starts_after_it() -> None:
    async def stream() -> str:
        watch = IdleWatch(0.05)
        try:
            watch.waiting = None  # judging, for four idle periods
            await asyncio.sleep(0.2)
            watch.waiting, watch.since = ANSWER, watch.clock()
            return await _idle_for(watch, 5.0)
        finally:
            watch.close()

    started = asyncio.get_running_loop().time()
    assert await stream() == "idle"
    assert asyncio.get_running_loop().time() - started >= 0.25  # the judged 0.2 s and the answer's 0.05 s


async def test_the_watch_reads_the_loops_clock() -> None:
    loop = asyncio.get_running_loop()
    watch = IdleWatch(60.0)
    try:
        assert abs(watch.clock() - loop.time()) < 0.5  # one clock: the timer's deadlines are in the loop's time
        assert watch.clock is time.monotonic  # asyncio's own loop: read without a Python frame
    finally:
        watch.close()


async def test_a_cancel_from_elsewhere_is_not_taken_for_idleness() -> None:
    """The client went away, or the server is stopping: that cancel goes on up, with or without the watch's."""
    entered = asyncio.Event()

    async def stream(seconds: float) -> str:
        watch = IdleWatch(seconds)
        try:
            entered.set()
            return await _idle_for(watch, 5.0)
        finally:
            watch.close()

    elsewhere = asyncio.create_task(stream(60.0))
    await entered.wait()
    elsewhere.cancel()
    with pytest.raises(asyncio.CancelledError):
        await elsewhere

    async def idle_and_cancelled() -> str:
        watch = IdleWatch(0.05)
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_later(0.06, task.cancel)  # a cancel from elsewhere, just after the watch's
        try:
            time.sleep(0.1)  # noqa: ASYNC251 -- the loop held on purpose: at the next wait both are due, in order
            outcome = await _idle_for(watch, 5.0)
            return f"{outcome}, the watch fired: {watch.fired}"
        finally:
            watch.close()

    both = asyncio.create_task(idle_and_cancelled())
    with pytest.raises(asyncio.CancelledError):
        await both


async def test_closing_the_watch_stops_its_timer() -> None:
    async def stream() -> str:
        watch = IdleWatch(0.05)
        watch.close()
        await asyncio.sleep(0.15)  # three idle periods: nothing cancels
        return "not cancelled"

    assert await stream() == "not cancelled"
