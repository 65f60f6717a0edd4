"""Members received in parts read as one sequence: length, iteration, items and slices across parts."""

from __future__ import annotations

import pytest

from argwatch.server.valuesets.parts import MemberParts

WHOLE = [f"m{i}" for i in range(23)]
PARTS = MemberParts([WHOLE[:10], WHOLE[10:11], WHOLE[11:]])


def test_it_reads_like_the_whole_list() -> None:
    assert len(PARTS) == 23 and list(PARTS) == WHOLE
    assert [PARTS[i] for i in (0, 9, 10, 11, 22, -1)] == [WHOLE[i] for i in (0, 9, 10, 11, 22, -1)]


@pytest.mark.parametrize("bounds", [(0, 8), (5, 15), (9, 12), (0, 23), (20, 40), (23, 30), (3, 3)])
def test_slices_cross_part_boundaries(bounds: tuple[int, int]) -> None:
    start, stop = bounds
    assert list(PARTS[start:stop]) == WHOLE[start:stop]


def test_out_of_range_is_an_index_error() -> None:
    with pytest.raises(IndexError):
        PARTS[23]
