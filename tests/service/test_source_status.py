"""GetStatus names each source as it is now: a record owner that stops answering is down, with its address,
its transport error, the record kinds it serves and the tools they affect; back, it is connected again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.sources import RecordStore
from argwatch.v1 import admin_pb2, sources_pb2_grpc
from tests.conftest import loopback_settings
from tests.service.helpers import admin_status, eventually
from tests.service.test_records_rules import ORDERS, call, policy_yaml

REFUND = {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100}


class Owner:
    """A real RecordSource on a fixed loopback port, stopped and started again on the same port."""

    def __init__(self) -> None:
        self.port = 0
        self.server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        sources_pb2_grpc.add_RecordSourceServicer_to_server(RecordStore(ORDERS), server)
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        await server.start()
        self.server = server

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(0)
            self.server = None


@pytest.fixture
async def owner_and_gateway(tmp_path) -> AsyncIterator[tuple[Owner, RunningGateway]]:
    owner = Owner()
    await owner.start()
    (tmp_path / "sets.yaml").write_text("refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM]}\n")
    (tmp_path / "policy.yaml").write_text(policy_yaml(f"127.0.0.1:{owner.port}", "closed"))
    policy = load_policy(str(tmp_path / "policy.yaml"))
    gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    yield owner, gateway
    await gateway.stop(0)
    await owner.stop()


def sources(status: admin_pb2.GetStatusResponse) -> dict[tuple[str, str], admin_pb2.SourceStatus]:
    return {(source.name, source.kind): source for source in status.sources}


async def test_a_record_owner_down_is_named_with_its_error_what_it_serves_and_the_tools_it_affects(
    owner_and_gateway: tuple[Owner, RunningGateway],
) -> None:
    owner, gateway = owner_and_gateway
    await call(gateway, REFUND)
    found = sources(await admin_status(gateway))
    assert list(found) == [("orders_db", "records"), ("local", "value_sets")]  # policy order
    orders, local = found["orders_db", "records"], found["local", "value_sets"]
    assert orders.connected and orders.address == f"127.0.0.1:{owner.port}" and not orders.last_transport_error
    assert (list(orders.record_kinds), list(orders.tools), list(orders.value_sets)) == (["order"], ["refund_order"], [])
    assert local.connected and local.address.endswith("sets.yaml")
    assert (list(local.value_sets), list(local.tools)) == (["refunds.reason_codes"], ["refund_order"])

    await owner.stop()
    await call(gateway, {**REFUND, "order_id": "ord_2"})  # not cached: the look-up goes to the owner, down
    orders = sources(await admin_status(gateway))["orders_db", "records"]
    assert not orders.connected
    assert orders.last_transport_error.startswith(f"127.0.0.1:{owner.port} Lookup: UNAVAILABLE: ")
    assert "connection refused" in orders.last_transport_error.lower(), orders.last_transport_error
    assert orders.HasField("last_transport_error_at")

    await owner.start()  # the same port: the gateway's channel reconnects by itself

    async def answering() -> bool:
        await call(gateway, {**REFUND, "order_id": "ord_9"})
        return sources(await admin_status(gateway))["orders_db", "records"].connected

    await eventually(answering)
    back = sources(await admin_status(gateway))["orders_db", "records"]
    assert "connection refused" in back.last_transport_error.lower()  # kept for the record, and over
