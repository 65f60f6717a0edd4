"""Issue 19: before a flip, the blast radius, computed by the gateway; and one set of figures on a known mix.

20 calls of refund_order in reject mode: 10 legal, 6 with an invented reason code, 4 with a legal one
in the wrong case. Every figure the Admin API gives for them must add up, and what a flip to observe
would have done is read from the same window.
"""

from __future__ import annotations

from argwatch.tui.blast_radius import impact
from argwatch.tui.status_view import repair_text, window_of
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_status, gateway_stub, request

MIX = ["DAMAGED_ITEM"] * 10 + ["GOODWILL", "BECAUSE", "OTHER", "NICE_TRY", "PLEASE", "BONUS"] + ["damaged_item"] * 4


async def test_the_figures_of_a_known_mix_add_up_and_give_the_blast_radius(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(MIX):
            verdict = await stub.Validate(
                request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5
            )
            assert (verdict.decision == pb.DECISION_ALLOW) is (code == "DAMAGED_ITEM")
    status = await admin_status(gateway)
    (tool,) = [t for t in status.tools if t.tool == "refund_order"]
    (argument,) = [a for a in status.arguments if (a.tool, a.argument) == ("refund_order", "reason_code")]
    calls, checks = window_of(tool, 900), window_of(argument, 900)
    assert (calls.calls, calls.rejected, calls.calls_with_problems, calls.calls_with_invented_values) == (20, 10, 10, 6)
    assert window_of(tool, 60).rejected_rate == 0.5  # the TUI's "refusing 50%" now
    assert (checks.value_checks, checks.out_of_set, checks.out_of_set_normalised) == (20, 10, 6)
    assert checks.problems == {"out_of_set": 10}
    assert dict(checks.shapes) == {"invented": 6, "case": 4}  # every out-of-set value has one shape
    assert calls.repair_started == 10 and repair_text(calls) == "0/0/10"  # every rejected call opened a repair
    # The blast radius of a flip to observe, as the mode dialog shows it.
    (said,) = impact([tool], "observe")
    assert said == "over the last 15 min, refund_order: observe would have let through 10 of 20 calls that " \
        "reject refused, 50.0%"  # fmt: skip
    assert impact([tool], "reject") == ["no change to any call: already in that mode"]
