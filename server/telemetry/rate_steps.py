"""Steps in an argument's out-of-set rate, for the incident timeline: when it jumped, and when it came back.

Every minute the last minute's rate is compared with the last 15 minutes'. A rate
over the policy's attention threshold (over at least its min_checks checks) and
at least twice the 15-minute rate is a step up; falling back under the threshold
is the step down. Each is one event, not one a minute.
"""

from __future__ import annotations

from collections.abc import Iterable

from argwatch.server.policy.model import AttentionConfig
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.status_windows import ArgumentWindows

STEP_FACTOR = 2.0


class RateSteps:
    """Remembers which rows are up, so each step is recorded once."""

    def __init__(self, events: EventLog) -> None:
        self._events = events
        self._up: set[tuple[str, str]] = set()

    def look(self, rows: Iterable[ArgumentWindows], attention: AttentionConfig) -> None:
        seen = set()
        for row in rows:
            windows = {figures.window_seconds: figures for figures in row.windows}
            minute, quarter = windows.get(60), windows.get(900)
            if minute is None or quarter is None:
                continue
            key = (row.tool, row.argument)
            seen.add(key)
            rate, before = minute.counts.out_of_set_rate, quarter.counts.out_of_set_rate
            enough = minute.counts.checks >= attention.min_checks
            if key not in self._up and enough and rate > attention.out_of_set_rate and rate >= STEP_FACTOR * before:
                self._up.add(key)
                self._events.record(
                    "rate", f"{row.tool} {row.argument}", f"out-of-set rate up: {before:.1%} over 15 min -> "
                    f"{rate:.1%} in the last minute ({minute.counts.out_of_set} of {minute.counts.checks})",
                )  # fmt: skip
            elif key in self._up and enough and rate <= attention.out_of_set_rate:
                self._up.discard(key)
                self._events.record(
                    "rate", f"{row.tool} {row.argument}", f"out-of-set rate back down: {rate:.1%} in the last minute"
                )
        self._up &= seen  # rows a reload removed
