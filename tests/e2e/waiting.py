"""Waiting on processes from tests: poll a condition, bounded, instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(
    condition: Callable[[], bool], seconds: float, what: str, *, tolerate: tuple[type[BaseException], ...] = ()
) -> None:
    """Polls `condition` every 0.1 s until it holds; fails naming `what` after `seconds`. Errors of the
    `tolerate` types count as "not yet" (a process still starting refuses connections)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return
        except tolerate:
            pass
        assert time.monotonic() < deadline, f"{what}: not within {seconds}s"
        time.sleep(0.1)
