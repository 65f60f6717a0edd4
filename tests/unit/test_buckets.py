"""The latency histogram's buckets in C (telemetry/_buckets.c) count as the Python histogram they replaced did:
bisect_left over the bounds, a float sum; and refuse bounds they could not bisect."""

from __future__ import annotations

import math
from bisect import bisect_left

import pytest
from hypothesis import given
from hypothesis import strategies as st

from argwatch.server.telemetry._buckets import Buckets

floats = st.floats(allow_nan=False, width=64)


@given(
    bounds=st.lists(floats, unique=True, max_size=12).map(lambda found: tuple(sorted(found))),
    values=st.lists(st.one_of(floats, st.just(math.nan), st.sampled_from([0.005, 0.01, 1e-9])), max_size=40),
)
def test_buckets_count_as_bisect_left_does(bounds: tuple[float, ...], values: list[float]) -> None:
    buckets = Buckets(bounds)
    counts, total = [0] * (len(bounds) + 1), 0.0
    for value in [*values, *bounds]:  # each bound itself too: it falls in its own bucket (le)
        index = bisect_left(bounds, value)
        counts[index] += 1
        total += value
        assert buckets.observe_index(value) == index
    assert buckets.counts() == counts
    assert buckets.sum == total or (math.isnan(buckets.sum) and math.isnan(total))


def test_observe_counts_too_and_bad_bounds_are_refused() -> None:
    buckets = Buckets((0.001, 0.01))
    buckets.observe(0.005)
    buckets.observe(1.0)
    assert buckets.counts() == [0, 1, 1]
    assert buckets.sum == 1.005
    with pytest.raises(TypeError):
        buckets.observe("slow")  # type: ignore[arg-type]
    for bounds in ((0.01, 0.001), (0.01, 0.01), (math.nan,)):
        with pytest.raises(ValueError, match="increasing"):
            Buckets(bounds)
    with pytest.raises(RuntimeError, match="once"):
        buckets.__init__((0.5,))  # type: ignore[misc]
    with pytest.raises(RuntimeError, match="__init__"):
        Buckets.__new__(Buckets).observe(0.1)
