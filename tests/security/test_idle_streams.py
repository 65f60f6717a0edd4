"""Streams that never send cannot starve other callers or the health probes, and are closed when idle.

The attack: a client with no credential opened ValidateStream calls that never
sent, up to --max-concurrent-rpcs. gRPC's cap counted every RPC alike, so from
then on every other caller's Validate and the gRPC health check (what the
Kubernetes probes use) got RESOURCE_EXHAUSTED, and no stream was ever ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import SourceServer, gateway_on, policy_text, write_sets_file
from tests.service.helpers import eventually, request, value


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
            await eventually(lambda: value(gateway.registry, "argwatch_rpcs_shed_total", limit="streams") == 4)
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
            assert value(gateway.registry, "argwatch_streams_idle_closed_total", waiting="request") == 4
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
            await eventually(lambda: value(gateway.registry, "argwatch_rpcs_shed_total", limit="streams_per_peer") == 1)
            (refused,) = [stream for stream in others if stream.done()]
            (silent,) = [stream for stream in others if stream is not refused]
            assert await refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-streams-per-peer" in await refused.details()
            # Keep the busy stream busy until the silent one is closed as idle: proof that an idle timeout
            # passed while this one never waited that long for a request.
            closed = asyncio.ensure_future(silent.code())
            index = 0
            while not closed.done():
                await busy.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id=f"b{index}"))
                assert (await busy.read()).call_id == f"b{index}"
                index += 1
                await asyncio.wait([closed], timeout=0.2)  # well within the 0.5 s idle timeout
            assert closed.result() == grpc.StatusCode.DEADLINE_EXCEEDED
            await busy.done_writing()
            assert await busy.code() == grpc.StatusCode.OK
    finally:
        await gateway.stop(0)


async def _status_within(stream: grpc.aio.StreamStreamCall[Any, Any], seconds: float) -> grpc.StatusCode:
    """The status the stream ended with; fails the test if it is still open after `seconds`."""
    code: grpc.StatusCode = await asyncio.wait_for(stream.code(), seconds)
    return code


async def test_a_stream_that_stops_reading_its_answers_gives_its_place_back(tmp_path: Path) -> None:
    """A client that keeps sending but never reads: once its receive window is full, gRPC's send waits on flow
    control. It was never closed, so a few addresses could hold every stream place; now an answer not taken for
    --stream-idle-seconds closes it, and the place is free again."""
    policy = "tools:\n  strict:\n    mode: reject\n    schema: {type: object, additionalProperties: false}\n"
    gateway = await gateway_on(tmp_path, policy, max_concurrent_rpcs=8, max_streams=2, stream_idle_seconds=0.5)
    # 2,000 arguments the schema does not allow: an answer of ~200 KB, so a few fill any receive window.
    crowded = {f"extra_{index}": index for index in range(2000)}
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            stream = stub.ValidateStream(timeout=60)

            async def send() -> None:
                for index in range(200):  # and never read; these writes block too once the gateway stops reading
                    await stream.write(request("strict", crowded, call_id=f"w{index}"))

            sending = asyncio.get_running_loop().create_task(send())
            await eventually(
                lambda: value(gateway.registry, "argwatch_streams_idle_closed_total", waiting="answer") == 1
            )
            await eventually(lambda: value(gateway.registry, "argwatch_streams_open") == 0)
            stream.cancel()
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await sending
    finally:
        await gateway.stop(0)


async def test_health_watches_and_reflection_streams_are_capped_and_check_still_answers(tmp_path: Path) -> None:
    """Health and reflection are not counted with the Gateway's calls (no load of those may refuse a probe), but
    their streams hold places too: past their caps they are refused, and a Health.Check still answers. gRPC's
    own cap stays, as a ceiling on everything the listener holds."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    from argwatch.server.edge import probes
    from argwatch.server.process.listener_options import rpc_ceiling

    gateway = await gateway_on(tmp_path, "tools:\n  t:\n    schema: {type: object}\n")
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            watches = [health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30) for _ in range(70)]
            for watch in watches:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await watch.read()
            refused = [watch for watch in watches if watch.done()]
            assert len(refused) == 70 - probes.MAX_HEALTH_WATCHES
            assert {await watch.code() for watch in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            checked = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert checked.status == health_pb2.HealthCheckResponse.SERVING

            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            streams = [stub.ServerReflectionInfo(timeout=30) for _ in range(20)]
            for stream in streams:
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):  # refused: finished
                    await stream.write(reflection_pb2.ServerReflectionRequest(list_services=""))
                    await stream.read()
            assert sum(stream.done() for stream in streams) == 20 - probes.MAX_REFLECTION_STREAMS
            for call in [*watches, *streams]:
                call.cancel()
        assert rpc_ceiling(1000) == 2100
    finally:
        await gateway.stop(0)
