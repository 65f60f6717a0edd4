"""Overload: past its cap a stream is refused with RESOURCE_EXHAUSTED at once, not queued; unary calls keep room."""

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


async def test_streams_past_their_cap_are_shed_while_unary_calls_are_served(
    tmp_path: Path, source: SourceServer
) -> None:
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(loopback_settings(policy.path), max_concurrent_rpcs=4)  # streams: a quarter, 1
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            held = stub.ValidateStream(timeout=10)
            await held.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id="held"))
            assert (await held.read()).call_id == "held"
            shed = stub.ValidateStream(timeout=10)
            assert await shed.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            answer = await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=5)
            assert answer.decision == pb.DECISION_ALLOW
            await held.done_writing()
            assert await held.read() == grpc.aio.EOF
            again = stub.ValidateStream(timeout=10)  # the place is free again
            await again.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id="again"))
            assert (await again.read()).call_id == "again"
            await again.done_writing()
    finally:
        await gateway.stop(0)


def test_settings_refuse_a_stream_cap_that_leaves_unary_calls_no_room() -> None:
    from argwatch.server.process.settings import Settings

    with pytest.raises(ValueError, match=r"--max-streams \(10\) must be below --max-concurrent-rpcs"):
        Settings(policy="p.yaml", max_concurrent_rpcs=10, max_streams=10)
    with pytest.raises(ValueError, match="--max-streams-per-peer"):
        Settings(policy="p.yaml", max_streams=10, max_streams_per_peer=11)
    assert Settings(policy="p.yaml").stream_limits == (250, 62)


def test_the_limit_and_keepalive_policy_are_stated_not_left_to_defaults() -> None:
    from argwatch.server.process.listener_options import gateway_server_options
    from argwatch.server.process.settings import Settings

    options = dict(gateway_server_options(Settings(policy="p.yaml")))
    assert options["grpc.max_receive_message_length"] == 4 * 1024 * 1024
    assert options["grpc.keepalive_time_ms"] == 30_000 and options["grpc.keepalive_timeout_ms"] == 10_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 10_000
    assert Settings(policy="p.yaml").max_concurrent_rpcs == 1000
    assert options["grpc.max_concurrent_streams"] == 256
    assert Settings(policy="p.yaml").stream_idle_seconds == 30.0
