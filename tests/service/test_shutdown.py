"""Graceful stop: a call in flight when the stop begins still gets its verdict; calls after it are refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import sources_pb2
from tests.conftest import RECORDS_POLICY, gateway_on
from tests.service.helpers import eventually, gateway_stub, request, serve_raw


class HeldRecords:
    """A real RecordSource that holds each look-up until the test releases it, then finds the record."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def lookup(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.started.set()
        await self.release.wait()
        return sources_pb2.LookupResponse(found=True).SerializeToString()


async def test_a_stop_drains_the_call_in_flight_and_refuses_new_ones(tmp_path: Path) -> None:
    records = HeldRecords()
    server, target = await serve_raw(
        "argwatch.v1.RecordSource", {"Lookup": grpc.unary_unary_rpc_method_handler(records.lookup)}
    )
    gateway = await gateway_on(tmp_path, RECORDS_POLICY.format(target=target))
    stopping: asyncio.Task[None] | None = None
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            in_flight = stub.Validate(request("refund_order", {"order_id": "ord_1"}), timeout=30)
            await asyncio.wait_for(records.started.wait(), timeout=10)  # the call is inside the gateway

            stopping = asyncio.create_task(gateway.stop(20))
            late_channel, late_stub = gateway_stub(gateway)
            async with late_channel:

                async def refused() -> bool:
                    # A call that slips in before the listener closes gets a verdict (failed closed, its
                    # look-up held) within its 0.5 s; from the stop on, a new call is refused outright:
                    # UNAVAILABLE once the listener is shut, CANCELLED by gRPC core when it arrives on a
                    # connection opened just before. Either way it never ran (deployed, the preStop pause in
                    # deploy/kubernetes has already turned new calls away to other replicas).
                    try:
                        await late_stub.Validate(request("refund_order", {"order_id": "ord_2"}), timeout=0.5)
                    except grpc.aio.AioRpcError as error:
                        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), error
                        return True
                    return False

                await eventually(refused)
            assert not stopping.done()  # still draining: the first call holds it

            records.release.set()
            drained = await in_flight
        assert drained.decision == pb.DECISION_ALLOW and not drained.problems  # its verdict, not an error
        await asyncio.wait_for(stopping, timeout=20)
    finally:
        records.release.set()
        if stopping is None:
            await gateway.stop(0)
        await server.stop(0)
