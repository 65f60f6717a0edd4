"""PreviewChange against what the gateway then does: a preview's figures are the decisions the change makes.

Each test sends calls, previews a change, and checks the figures against the
decisions the gateway actually made (or makes once the change is applied).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, gateway_on
from tests.service import test_side_effects as side_effects
from tests.service.helpers import admin_stub, eventually, gateway_stub, request
from tests.service.test_records_rules import Start
from tests.service.test_records_rules import start as start  # a fixture


async def _preview(gateway: RunningGateway, **change: Any) -> admin_pb2.PreviewChangeResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.PreviewChangeResponse = await admin.PreviewChange(
            admin_pb2.PreviewChangeRequest(change=admin_pb2.SetModeRequest(**change)), timeout=5
        )
        return response


async def _set(gateway: RunningGateway, **change: Any) -> None:
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(admin_pb2.SetModeRequest(reason="INC-1", **change), timeout=5)


async def _refused(gateway: RunningGateway, tool: str, calls: int) -> int:
    channel, stub = gateway_stub(gateway)
    async with channel:
        refused = 0
        for _ in range(calls):
            response = await stub.Validate(request(tool, {"order_id": "ord_1"}), timeout=5)
            refused += response.decision == pb.DECISION_REJECT
        return refused


async def test_clearing_a_global_reject_previews_the_calls_to_unknown_tools_it_would_let_through(
    start: Start,
) -> None:
    """A global reject refuses calls naming a tool the policy lacks; clearing it (the policy's default is
    observe) lets them through. The preview must count them, and name the protection."""
    gateway = await start()
    await _set(gateway, mode=pb.MODE_REJECT)
    assert await _refused(gateway, "refund_orders_v2", 4) == 4
    preview = await _preview(gateway, mode=pb.MODE_UNSPECIFIED)
    minute = preview.windows[0]
    await _set(gateway, mode=pb.MODE_UNSPECIFIED)
    let_through = 4 - await _refused(gateway, "refund_orders_v2", 4)
    assert let_through == 4
    assert (minute.calls, minute.refused_now, minute.newly_allowed) == (4, 4, let_through)
    assert {c.cause: c.calls for c in minute.newly_allowed_by_cause} == {"unknown_tool": 4}
    assert any(p.check == "" and "tool the policy does not know" in p.text for p in preview.switched_off)


async def test_a_global_observe_previews_unknown_tool_calls_under_a_reject_default(
    start: Start,
) -> None:
    """The global override holds for a tool the policy lacks, as the gateway's mode_for says."""
    gateway = await start()
    await _set(gateway, mode=pb.MODE_OBSERVE)
    assert await _refused(gateway, "nope", 3) == 0
    preview = await _preview(gateway, mode=pb.MODE_REJECT)
    minute = preview.windows[0]
    await _set(gateway, mode=pb.MODE_REJECT)
    assert (minute.refused_now, minute.newly_refused) == (0, await _refused(gateway, "nope", 3))


async def test_a_stale_set_judged_in_observe_is_not_previewed_as_refused(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    """on_stale: observe lets a rejecting tool's calls through while its set is stale: the calls the preview
    says the modes now refuse are the calls the gateway refused, and putting the tool in observe lets none
    of the stale ones through that were not already."""
    gateway = await gateway_factory(refund_mode="reject", on_stale="observe")
    await source.stop()
    channel, stub = gateway_stub(gateway)
    refused = sent = 0
    async with channel:

        async def stale() -> bool:
            nonlocal refused, sent
            response = await stub.Validate(request("refund_order", {"reason_code": "INVENTED"}), timeout=5)
            sent += 1
            refused += response.decision == pb.DECISION_REJECT
            return bool(response.downgraded_by_staleness)

        await eventually(stale)
        for _ in range(5):
            response = await stub.Validate(request("refund_order", {"reason_code": "INVENTED"}), timeout=5)
            sent += 1
            refused += response.decision == pb.DECISION_REJECT
    preview = await _preview(gateway, tool="refund_order", mode=pb.MODE_OBSERVE)
    minute = preview.windows[0]
    assert minute.calls == sent
    assert (minute.refused_now, minute.newly_allowed) == (refused, refused)


async def test_switching_off_the_repeat_check_of_a_tool_with_side_effects_is_a_security_protection(
    tmp_path: Path,
) -> None:
    """Issue 29: "security ones first: ownership, fail-closed checks, the repeat check on a tool with side
    effects". A refused repeat is the gateway stopping a second refund."""
    gateway = await gateway_on(tmp_path, side_effects.POLICY)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            first = await side_effects.refund(stub)
            again = await side_effects.refund(stub)
        assert (first.decision, again.decision) == (pb.DECISION_ALLOW, pb.DECISION_REJECT)
        preview = await _preview(gateway, tool="refund_order", check="repeat", mode=pb.MODE_OBSERVE, reason="x")
        assert (preview.windows[0].newly_allowed, preview.windows[0].refused_now) == (1, 1)
        assert [(p.kind, p.security, p.check) for p in preview.switched_off] == [("repeat", True, "repeat")]
        assert preview.lines[-1].startswith("  repeat (security): refund_order repeat would no longer refuse")
    finally:
        await gateway.stop(0)
