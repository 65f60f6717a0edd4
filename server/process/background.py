"""Stopping background tasks: cancel them all, then wait until each has finished."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancels every task and waits for all of them; their cancellations and errors are swallowed
    (a task stopped at shutdown has nothing left to report)."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
