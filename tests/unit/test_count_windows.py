"""CountWindows: a window counts only what happened in it, covers the span it says, and per-minute series add up."""

from __future__ import annotations

from argwatch.server.telemetry.count_windows import COARSE_SECONDS, FINE_SECONDS, CountWindows

KEY = ("refund_order", "reason_code", "checks")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def windows_over(counts: dict[tuple[str, str, str], int], clock: Clock) -> CountWindows[tuple[str, str, str]]:
    return CountWindows(lambda: dict(counts), clock)


def new_counts() -> dict[tuple[str, str, str], int]:
    return {}


def run(
    windows: CountWindows[tuple[str, str, str]],
    clock: Clock,
    counts: dict[tuple[str, str, str], int],
    seconds: float,
    per_step: int,
) -> None:
    """Advances `seconds` in sampler steps, adding `per_step` to KEY before each copy."""
    for _ in range(int(seconds / FINE_SECONDS)):
        clock.now += FINE_SECONDS
        counts[KEY] = counts.get(KEY, 0) + per_step
        windows.sample()


def test_a_one_minute_window_excludes_what_happened_before_it() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 300, per_step=10)  # 5 minutes at 2/s
    run(windows, clock, counts, 60, per_step=1)  # then a minute at 0.2/s
    deltas, covered = windows.window(60)
    assert deltas[KEY] == 12 and covered == 60
    whole, covered_all = windows.window(0)
    assert whole[KEY] == 600 + 12 and covered_all == 360


def test_a_window_longer_than_the_uptime_covers_the_uptime() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 120, per_step=5)
    deltas, covered = windows.window(3600)
    assert deltas[KEY] == 120 and covered == 120


def test_the_15_minute_window_uses_the_minute_copies_after_two_minutes() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 1800, per_step=1)  # 30 min at 0.2/s
    deltas, covered = windows.window(900)
    assert covered == 900 and deltas[KEY] == 180


def test_per_minute_series_sum_to_the_hour_and_end_with_the_running_minute() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 3 * COARSE_SECONDS, per_step=1)
    clock.now += 1
    counts[KEY] += 7  # the minute still running
    index = windows.index_of(KEY)
    assert index is not None
    series = windows.per_minute(windows.live(), index)
    assert len(series) == 60
    assert series[-4:] == [12, 12, 12, 7] and sum(series) == 43


def test_a_key_that_appears_later_counts_from_zero() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 60, per_step=1)
    counts[("refund_order", "", "calls")] = 5
    clock.now += 1
    deltas, _ = windows.window(30)
    assert deltas[("refund_order", "", "calls")] == 5


def test_a_count_reset_by_a_reload_starts_its_window_again_at_zero_never_below() -> None:
    clock, counts = Clock(), new_counts()
    windows = windows_over(counts, clock)
    run(windows, clock, counts, 120, per_step=10)  # 240 in two minutes
    counts.pop(KEY)  # a reload dropped the series (a model the policy no longer declares)
    run(windows, clock, counts, 10, per_step=3)  # it comes back from 0: 6 since
    deltas, _covered = windows.window_values(60)  # its base copy, a minute ago, held ~190
    assert deltas[windows.keys.index(KEY)] == 6  # not 6 - 240: the Admin API's figures are unsigned
    now = windows.live()
    assert min(windows.per_minute(now, windows.keys.index(KEY))) >= 0


def test_window_at_a_run_or_a_list_of_keys_reads_as_the_whole_window() -> None:
    clock = Clock()
    counts = {("t", "a", "checks"): 5, ("t", "b", "checks"): 7}
    windows = CountWindows(lambda: dict(counts), clock)
    clock.now += FINE_SECONDS
    windows.sample()
    counts[("t", "a", "checks")] = 2  # reset (a reload dropped it): counts from 0 again
    counts[("t", "c", "checks")] = 4  # newer than the copy
    clock.now += FINE_SECONDS
    now = windows.live()
    whole, covered = windows.window_from(now, 5)
    assert windows.window_at(now, 5, range(len(whole))) == (whole, covered)
    assert windows.window_at(now, 5, list(range(len(whole)))) == (whole, covered)
    assert whole == [2, 0, 4]
