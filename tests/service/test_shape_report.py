"""The shape report against traffic of known composition, from the Admin API and from a sampled log."""

from __future__ import annotations

import io

import orjson

from argwatch.server.telemetry.counts import fold
from argwatch.tui.report import render_admin, render_samples, shares_from_samples
from argwatch.v1 import admin_pb2
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_stub, gateway_stub, request

# 100 calls: 80 legal; 8 case slips, 4 separator slips, 4 retired, 4 invented (20 mismatches).
MIX = ["DAMAGED_ITEM"] * 80 + ["damaged_item"] * 8 + ["DAMAGED-ITEM"] * 4 + ["BROKEN"] * 4 + ["ITEM_DEFECTIVE"] * 4


async def test_the_report_matches_a_traffic_mix_of_known_composition(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for code in MIX:
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
    channel, admin = admin_stub(gateway)
    async with channel:
        report = await admin.GetShapeReport(admin_pb2.GetShapeReportRequest(window_seconds=0), timeout=5)
    (row,) = [r for r in report.rows if r.tool == "refund_order"]
    assert (row.argument, row.value_set, row.checks, row.out_of_set) == ("reason_code", "refunds.reason_codes", 100, 20)
    assert row.out_of_set_rate == 0.20
    assert (row.out_of_set_normalised, row.out_of_set_normalised_rate) == (8, 0.08)  # retired + invented
    assert [(s.shape, s.count, round(s.share, 3)) for s in row.shapes] == [
        ("case", 8, 0.4),
        ("invented", 4, 0.2),
        ("retired", 4, 0.2),
        ("separator", 4, 0.2),
    ]
    assert abs(sum(s.share for s in row.shapes) - 1.0) < 1e-9
    text = "\n".join(render_admin(report))
    assert (
        "refund_order.reason_code (refunds.reason_codes): 100 checks, out of set 20.0%, after normalisation 8.0%"
        in text
    )


async def test_a_recent_window_counts_only_what_happened_in_it(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for code in MIX[:50]:
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
        gateway.windows.sample()  # the periodic copy, taken now
        for code in MIX[80:]:
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
    counts, _ = gateway.windows.window(0.000001)  # back to the last copy: only the 20 mismatching calls
    reason_code = fold(counts).argument("refund_order", "reason_code")
    assert (reason_code.checks, reason_code.out_of_set) == (20, 20)


def test_the_report_from_a_sampled_log_gives_shares_and_skips_bad_lines() -> None:
    lines = [
        orjson.dumps({"tool": "refund_order", "argument": "reason_code", "code": "out_of_set", "shape": shape}).decode()
        for shape in ["case"] * 3 + ["invented"]
    ]
    lines += ['{"tool": "refund_order", "code": "wrong_type"}', "not json", ""]
    counts, bad = shares_from_samples(io.StringIO("\n".join(lines)))
    assert counts == {("refund_order", "reason_code"): {"case": 3, "invented": 1}} and bad == 1
    text = "\n".join(render_samples(counts, bad))
    assert "refund_order.reason_code: 4 samples | case 75.0% (3), invented 25.0% (1)" in text
