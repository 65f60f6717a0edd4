"""CallSignatures' bounds are over what is happening, not over the process' life.

A signature no call has had for the longest window a preview reads is
forgotten (with its copies in the windows), so the slots a tool filled with
combinations seen once, days ago, or by a caller sending odd arguments on
purpose, are free again when its record owner goes down: the outage's calls
are previewed, not reported as "not previewed".
"""

from __future__ import annotations

from argwatch.server.telemetry.call_signatures import NOT_KEPT, CallSignatures
from argwatch.server.telemetry.count_windows import FINE_SECONDS, CountWindows
from argwatch.server.verdict.call_signature import Signature


def _signature(cause: str) -> Signature:
    return frozenset({("arg:reason_code", cause, False)})


OLD_A, OLD_B, OUTAGE = _signature("invented"), _signature("case"), _signature("unverifiable")


def _gateway() -> tuple[list[float], CallSignatures, CountWindows[tuple[str, Signature]]]:
    clock = [1000.0]
    signatures = CallSignatures(max_per_tool=2)
    windows = CountWindows(signatures.counts, lambda: clock[0], forget_idle=(900.0, signatures.forget))
    return clock, signatures, windows


def _run(clock: list[float], windows: CountWindows[tuple[str, Signature]], seconds: float) -> None:
    for _ in range(int(seconds / FINE_SECONDS)):
        clock[0] += FINE_SECONDS
        windows.sample()


def _window(windows: CountWindows[tuple[str, Signature]], seconds: float) -> dict[tuple[str, Signature], int]:
    values, _ = windows.window_from(windows.live(), seconds)
    return {key: value for key, value in zip(windows.keys, values, strict=False) if value}


def test_a_tool_full_of_signatures_no_call_had_for_15_minutes_keeps_the_new_one() -> None:
    clock, signatures, windows = _gateway()
    signatures.count("refund_order", OLD_A)
    signatures.count("refund_order", OLD_B)
    _run(clock, windows, 1200)
    for _ in range(3):
        signatures.count("refund_order", OUTAGE)
    assert ("refund_order", NOT_KEPT) not in signatures.counts()
    assert _window(windows, 60) == {("refund_order", OUTAGE): 3}


def test_a_signature_still_counted_stays_and_windows_read_the_same_after_forgetting() -> None:
    clock, signatures, windows = _gateway()
    signatures.count("refund_order", OLD_A)
    for _ in range(240):  # 20 minutes: OLD_B every 5 s, OLD_A never again
        signatures.count("refund_order", OLD_B)
        clock[0] += FINE_SECONDS
        windows.sample()
    assert ("refund_order", OLD_A) not in signatures.counts()
    assert _window(windows, 900) == {("refund_order", OLD_B): 180}
    assert _window(windows, 60) == {("refund_order", OLD_B): 12}
    signatures.count("refund_order", OLD_A)  # back: counted from its return, not from its old total
    assert _window(windows, 900)[("refund_order", OLD_A)] == 1


def test_nothing_is_forgotten_before_the_windows_reach_back_15_minutes() -> None:
    clock, signatures, windows = _gateway()
    signatures.count("refund_order", OLD_A)
    _run(clock, windows, 600)
    assert ("refund_order", OLD_A) in signatures.counts()
    assert _window(windows, 900) == {("refund_order", OLD_A): 1}
