"""The detail view's word on offending values: values that were not set misses are never called inventions."""

from __future__ import annotations

from argwatch.tui.offender_verdict import offender_verdict
from argwatch.v1 import admin_pb2


def samples(total: int, share: float, clustered: bool, out_of_set: int, invented: int, *shapes: str):
    found = admin_pb2.ListSamplesResponse(
        total=total, top_two_share=share, clustered=clustered, out_of_set=out_of_set, invented=invented
    )
    for index, shape in enumerate(shapes):
        found.values.add(value=f'"v{index}"', count=total // (index + 2), shape=shape)
    return found


def test_ids_that_were_not_found_or_not_owned_are_not_inventions() -> None:
    said = offender_verdict(samples(40, 0.1, False, 0, 0, "", ""))
    assert "invent" not in said.replace("not inventions", "")
    assert said == (
        "scattered: the top two hold 10% of 40; 40 with other problems "
        "(an id not found or not owned, out of range, the wrong type): not inventions"
    )
    # The same ids again and again are no enum drift either: drift is a set's story.
    assert offender_verdict(samples(40, 0.9, True, 0, 0, "", "")).endswith("(the same values again and again); " + (
        "40 with other problems (an id not found or not owned, out of range, the wrong type): not inventions"
    ))  # fmt: skip


def test_inventions_are_the_set_misses_of_shape_invented_and_drift_the_clustered_set_misses() -> None:
    assert offender_verdict(samples(50, 0.2, False, 50, 44, "invented", "case")) == (
        "scattered: the top two hold 20% of 50; 44 of the 50 not in their set invented"
    )
    assert offender_verdict(samples(113, 0.85, True, 113, 17, "retired", "case")).startswith(
        "CLUSTERED: the top two values hold 85% of 113 (enum drift"
    )
    assert offender_verdict(admin_pb2.ListSamplesResponse()) == "none seen"
