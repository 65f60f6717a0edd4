"""The GIL's switch interval is lowered while a read runs beside the loop, and put back after the last one."""

from __future__ import annotations

import sys
import threading

import pytest

from argwatch.server.process.gil_handover import HANDOVER_SECONDS, handed_over_often, handing_over_often


def test_overlapping_reads_lower_the_interval_until_the_last_ends() -> None:
    before = sys.getswitchinterval()
    first_in, release = threading.Event(), threading.Event()
    seen: list[float] = []

    def first() -> None:
        with handed_over_often():
            first_in.set()
            release.wait(10)
            seen.append(sys.getswitchinterval())

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    assert sys.getswitchinterval() == HANDOVER_SECONDS

    @handing_over_often
    def second() -> float:
        return sys.getswitchinterval()

    assert second() == HANDOVER_SECONDS
    assert sys.getswitchinterval() == HANDOVER_SECONDS  # the first read still runs
    release.set()
    thread.join(10)
    assert seen == [HANDOVER_SECONDS]
    assert sys.getswitchinterval() == before


def test_a_read_that_raises_puts_the_interval_back() -> None:
    before = sys.getswitchinterval()

    @handing_over_often
    def fails() -> None:
        raise ValueError("not a policy")

    with pytest.raises(ValueError, match="not a policy"):
        fails()
    assert sys.getswitchinterval() == before
