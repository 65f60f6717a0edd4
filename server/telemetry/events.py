"""The incident timeline: what changed in the gateway's world, newest first, for on-call paged at 3 a.m.

Set states (stale, refused, not served, fresh again), source connects and
disconnects, and steps in a tool's out-of-set rate are recorded here as they
happen; mode changes and policy reloads come from the audit trail when the
timeline is read. Bounded: the newest MAX_EVENTS stay.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

MAX_EVENTS = 1000
MAX_DETAIL = 300  # a transport error can be long; the timeline is a list to scan


class Event(NamedTuple):
    """One thing that happened: when, what kind, to what, and in words."""

    at: float  # epoch seconds
    kind: str  # "set", "source", "rate", and from the audit "mode", "policy"
    subject: str  # a set, a source, a tool (and argument), "@policy"
    detail: str


class EventLog:
    """The newest MAX_EVENTS events, appended from the event loop."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._events: deque[Event] = deque(maxlen=MAX_EVENTS)

    def record(self, kind: str, subject: str, detail: str) -> None:
        cut = detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 1] + "…"
        self._events.append(Event(self._clock(), kind, subject, cut))

    def newest(self, limit: int) -> list[Event]:
        """Up to `limit` events, newest first."""
        found = list(self._events)[-limit:] if limit > 0 else []
        return found[::-1]
