"""Issue 19: the incident timeline (Admin.ListEvents), newest first, from a real gateway and a real owner."""

from __future__ import annotations

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, start_source
from tests.service.helpers import admin_stub, eventually


async def events(gateway: RunningGateway) -> list[admin_pb2.Event]:
    channel, admin = admin_stub(gateway)
    async with channel:
        response = await admin.ListEvents(admin_pb2.ListEventsRequest(limit=50), timeout=5)
    return list(response.events)


async def test_an_outage_and_a_flip_read_newest_first(gateway_factory: GatewayFactory, source: SourceServer) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    port, catalog = source.port, source.catalog
    await source.stop()  # the owner goes away

    async def stale_said() -> bool:
        return any(e.subject == "refunds.reason_codes" and e.detail.startswith("stale") for e in await events(gateway))

    await eventually(stale_said)
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-12 owner down"),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )
    back = await start_source(catalog, port=port)
    try:

        async def fresh_said() -> bool:
            return any(e.detail.startswith("fresh again") for e in await events(gateway))

        await eventually(fresh_said, seconds=15)
        timeline = await events(gateway)
        times = [e.at.ToNanoseconds() for e in timeline]
        assert times == sorted(times, reverse=True)  # newest first
        said = [(e.kind, e.subject, e.detail.split(":")[0]) for e in timeline]
        order = [
            said.index(("set", "refunds.reason_codes", "fresh again")),
            said.index(("mode", "refund_order", "reject -> observe by ana@oncall (INC-12 owner down)")),
            said.index(("set", "refunds.reason_codes", "stale")),
            said.index(("source", "owners", "disconnected")),
        ]
        assert order == sorted(order)
        assert ("source", "owners", "connected") in said
    finally:
        await back.stop()
