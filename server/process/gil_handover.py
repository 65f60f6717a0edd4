"""While a long read runs on a thread beside the event loop, the GIL changes hands every HANDOVER_SECONDS.

Python hands the GIL to a thread that asks for it after a switch interval of
5 ms, and a thread that gives it up for I/O (the event loop in its poll, the
moment a call arrives) asks again from the back of the queue. With a
10,000-tool policy read on a worker thread (a reload, a shadow being set),
the event loop waited up to a quarter of a second at a time for it, and every
Validate in flight with it. At a 1 ms interval the longest wait is a few
tens of milliseconds (docs/performance.md, catalogue.py), at the cost of
more handovers for the reader while it runs. The interval is process-wide:
it is lowered while at least one such read runs, and put back after the last.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

HANDOVER_SECONDS = 0.001

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_readers = 0
_interval_before = 0.0


@contextmanager
def handed_over_often() -> Iterator[None]:
    """The GIL's switch interval at most HANDOVER_SECONDS inside; as it was once the last overlapping one ends."""
    global _readers, _interval_before
    with _lock:
        if _readers == 0:
            _interval_before = sys.getswitchinterval()
            sys.setswitchinterval(min(_interval_before, HANDOVER_SECONDS))
        _readers += 1
    try:
        yield
    finally:
        with _lock:
            _readers -= 1
            if _readers == 0:
                sys.setswitchinterval(_interval_before)


def handing_over_often(function: Callable[P, T]) -> Callable[P, T]:
    """`function`, run inside handed_over_often (for asyncio.to_thread)."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with handed_over_often():
            return function(*args, **kwargs)

    return run
