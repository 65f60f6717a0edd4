"""The live status line: rates per tool, unknown tools, and sets that are down, from an Admin status."""

from __future__ import annotations

from argwatch.tui.status_line import render
from argwatch.v1 import admin_pb2, gateway_pb2


def status(seconds: int, calls: int, *, set_down: bool = False) -> admin_pb2.GetStatusResponse:
    response = admin_pb2.GetStatusResponse()
    response.taken_at.FromSeconds(seconds)
    response.tools.add(
        tool="refund_order",
        mode=gateway_pb2.MODE_REJECT,
        calls=calls,
        value_checks=calls,
        out_of_set=calls // 10,
        out_of_set_normalised=calls // 20,
        rejected=3,
        unavailable=0,
    )
    response.tools.add(tool="_unknown", calls=2)
    response.value_sets.add(name="refunds.reason_codes", available=not set_down)
    return response


def test_the_line_shows_rate_mode_mismatch_rates_rejections_and_fail_open() -> None:
    line = render(status(12, 200), status(10, 100))
    assert line == "50/s | refund_order REJ 200 oos 10.0%/5.0% rej 3 open 0 | unknown tools 2"


def test_a_set_that_is_down_is_called_out() -> None:
    assert render(status(1, 0, set_down=True), None).endswith("| SETS DOWN: refunds.reason_codes")
    assert "oos -/-" in render(status(1, 0), None)
