"""Streams that never send cannot starve other callers or the health probes, and are closed when idle.

The attack: a client with no credential opened ValidateStream calls that never
sent, up to --max-concurrent-rpcs. gRPC's cap counted every RPC alike, so from
then on every other caller's Validate and the gRPC health check (what the
Kubernetes probes use) got RESOURCE_EXHAUSTED, and no stream was ever ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import SourceServer, gateway_on, policy_text, write_sets_file
from tests.service.helpers import request, value


async def _open_idle(channel: grpc.aio.Channel, count: int) -> list[Any]:
    """`count` ValidateStream calls that send nothing, each started (the gateway has admitted or refused it)."""
    stub = gateway_pb2_grpc.GatewayStub(channel)
    streams = [stub.ValidateStream(timeout=30) for _ in range(count)]
    for stream in streams:
        with contextlib.suppress(grpc.aio.AioRpcError):  # refused at once: its status is read below
            await stream.wait_for_connection()
    return streams


async def test_idle_streams_leave_room_for_validate_and_health_and_are_closed(
    tmp_path: Path, source: SourceServer
) -> None:
    """With every stream place taken by silent streams, Validate and health still answer; the extra streams are
    refused at once, each silent stream is closed within its idle timeout with a status saying why, and all of it
    is counted."""
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(
        tmp_path,
        policy_text(source.target, "sets.yaml"),
        max_concurrent_rpcs=8,
        max_streams=4,
        max_streams_per_peer=4,
        stream_idle_seconds=1.0,
    )
    try:
        attacker = grpc.aio.insecure_channel(gateway.target)
        caller = grpc.aio.insecure_channel(gateway.target)
        async with attacker, caller:
            streams = await _open_idle(attacker, 8)  # the cap of the old code: every RPC place
            await _until(lambda: value(gateway.registry, "argwatch_rpcs_shed_total", limit="streams") == 4)
            assert value(gateway.registry, "argwatch_streams_open") == 4
            refused = [stream for stream in streams if stream.done()]
            assert len(refused) == 4
            for stream in refused:
                assert await stream.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--max-streams" in await stream.details()
            silent = [stream for stream in streams if stream not in refused]

            stub = gateway_pb2_grpc.GatewayStub(caller)
            for index in range(6):  # more than the places streams left: unary calls are not streams
                answer = await stub.Validate(
                    request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id=f"c{index}"), timeout=5
                )
                assert answer.decision == pb.DECISION_ALLOW
            health = health_pb2_grpc.HealthStub(caller)
            checked = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert checked.status == health_pb2.HealthCheckResponse.SERVING

            for stream in silent:  # closed by the gateway within the idle timeout (1 s)
                assert await _status_within(stream, 5.0) == grpc.StatusCode.DEADLINE_EXCEEDED
                assert "no request for 1s" in (await stream.details())
            assert value(gateway.registry, "argwatch_streams_idle_closed_total") == 4
            assert value(gateway.registry, "argwatch_streams_open") == 0
    finally:
        await gateway.stop(0)


async def test_one_peer_cannot_take_every_stream_place(tmp_path: Path, source: SourceServer) -> None:
    """Past --max-streams-per-peer, a peer's next stream is refused naming that limit; a stream that keeps sending
    is never closed as idle, and a silent one is."""
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(
        tmp_path,
        policy_text(source.target, "sets.yaml"),
        max_concurrent_rpcs=16,
        max_streams=8,
        max_streams_per_peer=2,
        stream_idle_seconds=0.5,
    )
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            busy = stub.ValidateStream(timeout=30)
            await busy.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id="first"))
            assert (await busy.read()).call_id == "first"  # admitted
            others = await _open_idle(channel, 2)  # one place left for this peer: which stream gets it is gRPC's
            await _until(lambda: value(gateway.registry, "argwatch_rpcs_shed_total", limit="streams_per_peer") == 1)
            (refused,) = [stream for stream in others if stream.done()]
            (silent,) = [stream for stream in others if stream is not refused]
            assert await refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-streams-per-peer" in await refused.details()
            for index in range(6):  # 1.5 s in all, three idle timeouts: a stream in use stays open
                await busy.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id=f"b{index}"))
                assert (await busy.read()).call_id == f"b{index}"
                await asyncio.sleep(0.25)
            await busy.done_writing()
            assert await busy.code() == grpc.StatusCode.OK
            assert await _status_within(silent, 5.0) == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        await gateway.stop(0)


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Polls `condition` every 10 ms; fails the test after `seconds`."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def _status_within(stream: grpc.aio.StreamStreamCall[Any, Any], seconds: float) -> grpc.StatusCode:
    """The status the stream ended with; fails the test if it is still open after `seconds`."""
    code: grpc.StatusCode = await asyncio.wait_for(stream.code(), seconds)
    return code
