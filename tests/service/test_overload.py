"""Overload: past max_concurrent_rpcs a call is refused with RESOURCE_EXHAUSTED at once, not queued; then served."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import request


async def test_calls_past_the_limit_are_shed_and_served_again_when_there_is_room(
    tmp_path: Path, source: SourceServer
) -> None:
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(loopback_settings(policy.path), max_concurrent_rpcs=2)
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            streams = [stub.ValidateStream(timeout=10) for _ in range(2)]
            for index, stream in enumerate(streams):  # two RPCs in flight, held open
                await stream.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id=f"held-{index}"))
                assert (await stream.read()).call_id == f"held-{index}"
            with pytest.raises(grpc.aio.AioRpcError) as shed:
                await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=5)
            assert shed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            await streams[0].done_writing()
            assert await streams[0].read() == grpc.aio.EOF
            answer = await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=5)
            assert answer.decision == pb.DECISION_ALLOW
            await streams[1].done_writing()
    finally:
        await gateway.stop(0)


def test_the_limit_and_keepalive_policy_are_stated_not_left_to_defaults() -> None:
    from argwatch.server.edge.listener_options import gateway_server_options
    from argwatch.server.process.settings import Settings

    options = dict(gateway_server_options(Settings(policy="p.yaml")))
    assert options["grpc.max_receive_message_length"] == 4 * 1024 * 1024
    assert options["grpc.keepalive_time_ms"] == 30_000 and options["grpc.keepalive_timeout_ms"] == 10_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 10_000
    assert Settings(policy="p.yaml").max_concurrent_rpcs == 1000
