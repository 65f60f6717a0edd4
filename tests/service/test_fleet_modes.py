"""Modes shared through a real Redis by gateways in one process: a flip anywhere reaches everyone; Redis down keeps
the last modes and refuses changes; Redis back (empty) gets the fleet's state written back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import replace
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request, value

Start = Callable[[str], Coroutine[Any, Any, RunningGateway]]


@pytest.fixture
async def redis(tmp_path) -> AsyncIterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


@pytest.fixture
async def start(tmp_path, source: SourceServer, redis: RedisProcess) -> AsyncIterator[Start]:
    started: list[RunningGateway] = []

    async def start_one(replica_id: str) -> RunningGateway:
        policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
        settings = replace(loopback_settings(policy.path), redis=redis.url, replica_id=replica_id)
        gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
        started.append(gateway)
        return gateway

    yield start_one
    for gateway in started:
        await gateway.stop(0)


async def set_mode(gateway: RunningGateway, mode: pb.Mode, reason: str = "INC-11") -> admin_pb2.SetModeResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.SetModeResponse = await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=reason),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )
        return response


async def test_a_flip_through_one_replica_reaches_the_others_and_their_audit(start: Start) -> None:
    first, second = await start("replica-a"), await start("replica-b")
    await set_mode(first, pb.MODE_OBSERVE)

    async def both_observe() -> bool:
        return all(g.modes.mode_for("refund_order") is Mode.OBSERVE for g in (first, second))

    await eventually(both_observe, seconds=5)
    channel, stub = gateway_stub(second)
    async with channel:
        verdict = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
    assert (verdict.decision, verdict.mode) == (pb.DECISION_ALLOW, pb.MODE_OBSERVE)
    (change,) = second.modes.changes()
    assert (change.actor, change.target, change.new, change.reason) == (
        "ana@oncall",
        "refund_order",
        "observe",
        "INC-11",
    )
    seen = await admin_status(second)
    assert (seen.mode_store, seen.mode_store_connected) == ("redis", True)
    assert value(second.registry, "argwatch_mode_store_connected") == 1


async def test_the_fleet_view_lists_every_replica_and_what_it_enforces(start: Start) -> None:
    first, second = await start("replica-a"), await start("replica-b")
    await set_mode(first, pb.MODE_OBSERVE)

    async def both_listed() -> bool:
        found = await admin_status(first)
        modes = {r.replica_id: r.modes.get("refund_order") for r in found.replicas}
        return modes == {"replica-a": "observe", "replica-b": "observe"}

    await eventually(both_listed, seconds=10)
    found = await admin_status(first)
    (b,) = [r for r in found.replicas if r.replica_id == "replica-b"]
    assert b.reporting and b.policy_version == second.policy.version
    assert b.value_set_versions["refunds.reason_codes"] == 1 and b.sources_connected["owners"]


async def test_redis_down_keeps_modes_refuses_changes_and_catches_up_when_back(
    start: Start, redis: RedisProcess, tmp_path
) -> None:
    first, second = await start("replica-a"), await start("replica-b")
    await set_mode(first, pb.MODE_OBSERVE)

    async def both_observe() -> bool:
        return all(g.modes.mode_for("refund_order") is Mode.OBSERVE for g in (first, second))

    await eventually(both_observe, seconds=5)
    redis.kill()

    async def store_lost() -> bool:
        return not (await admin_status(second)).mode_store_connected

    await eventually(store_lost, seconds=10)
    channel, stub = gateway_stub(second)
    async with channel:
        for _ in range(20):  # calls are answered, from the last modes known
            verdict = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=2)
            assert verdict.mode == pb.MODE_OBSERVE
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await set_mode(first, pb.MODE_REJECT)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "unreachable" in (refused.value.details() or "")
    assert value(second.registry, "argwatch_mode_store_connected") == 0

    back = start_redis(str(tmp_path), port=redis.port)  # the same address, empty (no persistence)
    try:

        async def store_back() -> bool:
            return (await admin_status(first)).mode_store_connected and (
                await admin_status(second)
            ).mode_store_connected

        await eventually(store_back, seconds=15)
        # The fleet's state was written back: a replica starting now adopts the override.
        third = await start("replica-c")
        assert third.modes.mode_for("refund_order") is Mode.OBSERVE
        await set_mode(second, pb.MODE_REJECT, reason="INC-11 over")

        async def all_reject() -> bool:
            return all(g.modes.mode_for("refund_order") is Mode.REJECT for g in (first, second, third))

        await eventually(all_reject, seconds=5)
    finally:
        back.kill()
