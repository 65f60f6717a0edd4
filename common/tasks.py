"""Background tasks: a set that logs what failed, and stopping them all (cancel, then wait for each)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancels every task and waits for all of them; their cancellations and errors are swallowed
    (a task stopped at shutdown has nothing left to report)."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


class TaskSet:
    """Tasks started in the background and kept until they finish; a failure is logged, never lost."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what  # names the owner in the failure's log line
        self._tasks: list[asyncio.Task[None]] = []

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.append(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks and task.done() and not task.cancelled():
            self._tasks.remove(task)
            if task.exception() is not None:
                self._log.error("%s task failed", self._what, exc_info=task.exception())

    async def cancel_all(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
