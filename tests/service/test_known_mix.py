"""One set of figures on a known mix, read through the Admin API, and what the flip dialog shows before a flip.

20 calls of refund_order in reject mode: 10 legal, 6 with an invented reason code, 4 with a legal one in the
wrong case. Every figure GetStatus gives for them must add up, and PreviewChange (what the dialog and
`argwatch mode` show, replacing issue 19's 15-minute share) says, per window, which calls a flip to observe
would let through and why: a count of calls among those refused now, never a share of refusals.
"""

from __future__ import annotations

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.status_view import repair_text, window_of
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_status, gateway_stub, request

MIX = ["DAMAGED_ITEM"] * 10 + ["GOODWILL", "BECAUSE", "OTHER", "NICE_TRY", "PLEASE", "BONUS"] + ["damaged_item"] * 4


async def test_the_figures_of_a_known_mix_add_up_and_the_preview_names_what_a_flip_lets_through(
    gateway_factory: GatewayFactory,
) -> None:
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

    client = AdminClient(Connection(gateway.admin_target))  # the dialog's own door to the gateway
    try:
        preview = await client.preview(admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE))
        same = await client.preview(admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_REJECT))
    finally:
        await client.close()
    for window in preview.windows:  # the same 20 calls in both windows: the gateway started a moment ago
        assert (window.calls, window.refused_now, window.newly_allowed, window.newly_refused) == (20, 10, 10, 0)
        assert {c.cause: c.calls for c in window.newly_allowed_by_cause} == {"invented": 6, "case": 4}
    said = "\n".join(preview.lines)
    assert (
        "20 calls to refund_order on this replica, refused or not; "
        "the modes in force now would have refused 10 of them" in said
    )
    assert "it would let through 10 of those 10 refused calls: 6 invented values, 4 wrong case" in said
    assert not same.changes_anything and "it would have decided none of them differently" in "\n".join(same.lines)
