"""A tool's "now" figures (ToolStatus.recent) cover the last 15-20 s: refusals before a flip or a recovery
leave them within seconds, while the minute still holds them."""

from __future__ import annotations

from argwatch.server.policy.loader import parse_policy
from argwatch.server.telemetry.count_windows import FINE_SECONDS, CountWindows
from argwatch.server.telemetry.counts import CheckKind, Count, CountKey, ToolCounts
from argwatch.server.telemetry.status_windows import RECENT_SECONDS, StatusWindows, WindowFigures

POLICY = parse_policy(b"tools: {refund_order: {mode: reject, schema: {type: object}}}\n", "/p.yaml")
CALLS, REJECTED = (CountKey("refund_order", "", what) for what in (Count.CALLS, Count.REJECTED))


def tool_counts(figures: WindowFigures) -> ToolCounts:
    assert isinstance(figures.counts, ToolCounts)  # a tool row's
    return figures.counts


def test_recent_refusals_follow_the_last_seconds_while_the_minute_lags() -> None:
    now = [1000.0]
    counts: dict[CountKey, int] = {}
    windows = CountWindows(lambda: dict(counts), lambda: now[0])

    def step(calls: int, rejected: int) -> None:
        now[0] += FINE_SECONDS
        counts[CALLS] = counts.get(CALLS, 0) + calls
        counts[REJECTED] = counts.get(REJECTED, 0) + rejected
        windows.sample()

    for _ in range(6):  # 30 s refusing every call
        step(10, 10)
    figures = StatusWindows(POLICY, windows).figures().tool("refund_order")
    assert tool_counts(figures.recent).rejected_rate == 1.0
    for _ in range(4):  # then 20 s of passing calls: the flip, or the source back
        step(10, 0)
    figures = StatusWindows(POLICY, windows).figures().tool("refund_order")
    recent, minute = figures.recent, figures.windows[0]
    assert recent.window_seconds == RECENT_SECONDS and RECENT_SECONDS <= recent.covered_seconds <= 20
    assert tool_counts(recent).rejected == 0 and tool_counts(recent).calls >= 30
    assert tool_counts(minute).rejected == 60  # the minute still holds every refusal
    assert recent.per_second == tool_counts(recent).calls / recent.covered_seconds


def test_a_tool_never_called_has_no_recent_calls() -> None:
    windows: CountWindows[CountKey] = CountWindows(dict, lambda: 1000.0)
    recent = StatusWindows(POLICY, windows).figures().tool("refund_order").recent
    assert (tool_counts(recent).calls, tool_counts(recent).rejected, recent.per_second) == (0, 0, 0.0)


def test_attention_takes_the_worst_argument_not_the_tool_summed() -> None:
    now = [1000.0]
    checks = {
        argument: CountKey("refund_order", argument, Count.CHECKS, check=CheckKind.VALUE_SET) for argument in "ab"
    }
    misses = {argument: key._replace(what=Count.OUT_OF_SET) for argument, key in checks.items()}
    counts = {CALLS: 1000, REJECTED: 0, checks["a"]: 1000, misses["a"]: 0, checks["b"]: 40, misses["b"]: 20}
    windows = CountWindows(lambda: dict(counts), lambda: now[0])
    now[0] += FINE_SECONDS
    ranks = StatusWindows(POLICY, windows).attention(windows.live(), min_checks=20)
    seen = ranks["refund_order"]
    # Summed, the tool is at 20 of 1,040 (1.9%, under a 3% threshold); its argument b is at half.
    assert (seen.worst_out_of_set_rate, seen.worst_checks) == (0.5, 40)
    assert seen.calls_per_second == 1000 / FINE_SECONDS
    fewer = StatusWindows(POLICY, windows).attention(windows.live(), min_checks=100)
    assert (fewer["refund_order"].worst_out_of_set_rate, fewer["refund_order"].worst_checks) == (0.0, 1000)
