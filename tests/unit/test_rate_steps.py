"""Steps in an argument's out-of-set rate go to the incident timeline once each way, not once a minute."""

from __future__ import annotations

from argwatch.server.policy.model import AttentionConfig
from argwatch.server.telemetry.counts import ArgumentCounts
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.rate_steps import RateSteps
from argwatch.server.telemetry.status_windows import ArgumentWindows, WindowFigures


def row(minute_oos: int, minute_checks: int, quarter_oos: int, quarter_checks: int) -> ArgumentWindows:
    def figures(seconds: int, oos: int, checks: int) -> WindowFigures:
        counts = ArgumentCounts(checks=checks, out_of_set=oos, out_of_set_normalised=oos)
        return WindowFigures(seconds, seconds, checks / seconds, counts)

    windows = (figures(60, minute_oos, minute_checks), figures(900, quarter_oos, quarter_checks))
    return ArgumentWindows("refund_order", "reason_code", "refunds.reason_codes", windows, [], [])


def test_a_jump_is_one_event_and_the_return_another() -> None:
    log = EventLog(clock=lambda: 1000.0)
    steps, attention = RateSteps(log), AttentionConfig()
    steps.look([row(2, 100, 30, 1500)], attention)  # 2% against 2%: nothing
    steps.look([row(12, 100, 40, 1500)], attention)  # 12% against 2.7%: up
    steps.look([row(14, 100, 60, 1500)], attention)  # still up: no second event
    steps.look([row(5, 10, 60, 1500)], attention)  # too few checks to say anything
    steps.look([row(1, 100, 60, 1500)], attention)  # back under 3%: down
    said = [event.detail for event in log.newest(10)][::-1]
    assert said == [
        "out-of-set rate up: 2.7% over 15 min -> 12.0% in the last minute (12 of 100)",
        "out-of-set rate back down: 1.0% in the last minute",
    ]


def test_the_log_keeps_the_newest_and_cuts_long_details() -> None:
    log = EventLog(clock=lambda: 1.0)
    for index in range(1005):
        log.record("set", f"s{index}", "x" * 400)
    newest = log.newest(2000)
    assert len(newest) == 1000 and newest[0].subject == "s1004" and len(newest[0].detail) == 300
