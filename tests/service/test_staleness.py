"""Staleness at the gateway: a stale copy still checks and says so; on_stale: observe stops rejecting, counted."""

from __future__ import annotations

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request, value


async def stale_verdict(gateway, source: SourceServer) -> pb.ValidateResponse:
    await source.stop()
    channel, stub = gateway_stub(gateway)
    async with channel:

        async def stale() -> bool:
            response = await stub.Validate(request("refund_order", {"reason_code": "INVENTED"}), timeout=5)
            return bool(response.value_sets) and response.value_sets[0].stale

        await eventually(stale)
        response: pb.ValidateResponse = await stub.Validate(
            request("refund_order", {"reason_code": "INVENTED"}), timeout=5
        )
        return response


async def test_a_stale_set_is_still_enforced_and_the_verdict_says_it_was_stale(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject", on_stale="enforce")
    response = await stale_verdict(gateway, source)
    assert (response.decision, response.mode, response.downgraded_by_staleness) == (
        pb.DECISION_REJECT,
        pb.MODE_REJECT,
        False,
    )
    assert [p.shape for p in response.problems] == [pb.SHAPE_INVENTED]
    assert response.value_sets[0].stale
    assert (
        value(gateway.registry, "tool_argument_check_stale_total", tool="refund_order", set="refunds.reason_codes") >= 1
    )
    assert (
        value(gateway.registry, "argwatch_stale_downgrades_total", tool="refund_order", set="refunds.reason_codes") == 0
    )
    status = await admin_status(gateway)  # the count model's per-tool figure, as GetStatus gives it
    assert next(tool for tool in status.tools if tool.tool == "refund_order").stale_checks >= 1


async def test_on_stale_observe_judges_a_rejecting_tool_in_observe_and_counts_it(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject", on_stale="observe")
    response = await stale_verdict(gateway, source)
    assert (response.decision, response.mode, response.downgraded_by_staleness) == (
        pb.DECISION_ALLOW,
        pb.MODE_OBSERVE,
        True,
    )
    assert [p.shape for p in response.problems] == [pb.SHAPE_INVENTED]  # still measured
    assert (
        value(gateway.registry, "argwatch_stale_downgrades_total", tool="refund_order", set="refunds.reason_codes") >= 1
    )


async def test_admin_status_shows_a_stale_set_and_its_disconnected_source(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory()
    await stale_verdict(gateway, source)
    channel, admin = admin_stub(gateway)
    async with channel:
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    sets = {s.name: s for s in status.value_sets}
    refunds = sets["refunds.reason_codes"]
    assert (refunds.available, refunds.stale, refunds.source_connected) == (True, True, False)
    assert refunds.last_error and refunds.age_seconds >= 0
    local = sets["wms.warehouses"]
    assert (local.available, local.stale, local.source_connected) == (True, False, True)
