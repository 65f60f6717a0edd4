"""Modes shared through a real Redis by gateways in one process: a flip anywhere reaches everyone; Redis down keeps
the last modes and refuses changes; Redis back (empty) gets the fleet's state written back. The fleet's tests run
on one redis-server and again on a Cluster of 3 primaries (redis+cluster://)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import replace
from typing import Any

import grpc
import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes import fleet
from argwatch.server.modes.fleet import KEY
from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.redis_server import RedisCluster, RedisProcess, ask, start_redis
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request, stored_audit, value

Start = Callable[[str], Coroutine[Any, Any, RunningGateway]]


@pytest.fixture
async def redis(tmp_path) -> AsyncIterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


@pytest.fixture(params=["redis", "cluster"])
def shared_url(request: pytest.FixtureRequest) -> str:
    """The --redis of the test's gateways: one redis-server, or the module's Cluster emptied for the test."""
    if request.param == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        return cluster.url
    redis: RedisProcess = request.getfixturevalue("redis")
    return redis.url


@pytest.fixture
async def start(tmp_path, source: SourceServer, shared_url: str) -> AsyncIterator[Start]:
    started: list[RunningGateway] = []

    async def start_one(replica_id: str) -> RunningGateway:
        policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
        settings = replace(loopback_settings(policy.path), redis=shared_url, replica_id=replica_id)
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


async def test_concurrent_flips_through_every_replica_are_each_applied_once(start: Start) -> None:
    """Each change is one transaction on the whole state (in a Cluster, on the slot of {argwatch:modes}):
    changes racing through three replicas are all audited, none twice, and every replica ends on the same
    state."""
    fleet = [await start(f"replica-{name}") for name in "abc"]
    modes = (pb.MODE_OBSERVE, pb.MODE_REJECT)
    for round_ in range(3):
        await asyncio.gather(
            *(set_mode(g, modes[(i + round_) % 2], reason=f"INC-{round_}-{i}") for i, g in enumerate(fleet))
        )
    reasons = {f"INC-{r}-{i}" for r in range(3) for i in range(3)}

    async def agreed() -> bool:
        audits = [[c.reason for c in g.modes.changes()] for g in fleet]
        return all(sorted(a) == sorted(reasons) for a in audits) and len({g.modes.version for g in fleet}) == 1

    await eventually(agreed, seconds=10)
    assert len({g.modes.mode_for("refund_order") for g in fleet}) == 1


@pytest.mark.parametrize("shared_url", ["redis"], indirect=True)  # the state written into one redis-server
async def test_a_change_redis_lost_comes_back_beside_the_one_made_on_the_new_primary(
    start: Start, redis: RedisProcess
) -> None:
    """What a failover leaves: Redis lost a change every replica holds, and another was made on the new primary at
    the same version. Versions cannot tell them apart; the replicas add the lost change back beside the new one,
    whose target's override (the later change) is in force everywhere, and the fleet agrees."""
    first, second = await start("replica-a"), await start("replica-b")
    await set_mode(first, pb.MODE_OBSERVE, reason="INC-lost")

    async def both_have_it() -> bool:
        return all(g.modes.mode_for("refund_order") is Mode.OBSERVE for g in (first, second))

    await eventually(both_have_it, seconds=5)
    raw = ask(redis.port, "GET", KEY)
    assert isinstance(raw, bytes)
    other = orjson.loads(raw)
    assert other["log"]["counts"] == [1, 0]  # a head (format 2): the sorted set beside it holds the change
    (lost,) = stored_audit(redis.port)
    made = {**lost, "at": lost["at"] + 1, "old": "observe", "new": "reject", "reason": "INC-made-on-the-new-primary"}
    other["audit"] = [made]  # the new primary's one change, at the same count as the change it lost
    other["overrides"]["refund_order"].update(mode="reject", reason=made["reason"], set_at=made["at"])
    ask(redis.port, "SET", KEY, orjson.dumps(other).decode())
    ask(redis.port, "DEL", fleet.KEYS.audit)
    ask(redis.port, "ZADD", fleet.KEYS.audit, repr(made["at"]), orjson.dumps(made).decode())

    async def both_hold_both() -> bool:
        reasons = [[change.reason for change in g.modes.changes()] for g in (first, second)]
        return all(found == ["INC-made-on-the-new-primary", "INC-lost"] for found in reasons)

    await eventually(both_hold_both, seconds=10)
    assert all(g.modes.mode_for("refund_order") is Mode.REJECT for g in (first, second))
    await eventually(lambda: first.modes.version == second.modes.version > other["version"], seconds=10)
    assert [entry["reason"] for entry in stored_audit(redis.port)] == ["INC-lost", "INC-made-on-the-new-primary"]


async def test_an_acl_user_and_an_escaped_password_reach_redis_for_modes_and_the_shared_cache(
    tmp_path, source: SourceServer, redis: RedisProcess
) -> None:
    """redis://USER:PASSWORD@...: the password percent-decoded, the user named, for the shared cache too."""
    ask(redis.port, "ACL", "SETUSER", "argwatch", "on", ">p@ss/w", "~*", "&*", "+@all")
    ask(redis.port, "CONFIG", "SET", "requirepass", "not-the-one")  # the default user no longer lets anyone in
    url = f"redis://argwatch:p%40ss%2Fw@127.0.0.1:{redis.port}/0"
    cache = SharedCache(redis_from_url(url), GatewayMetrics(CollectorRegistry()), timeout=2.0)
    try:
        assert await cache.start()
    finally:
        await cache.close()
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    gateway = await build_gateway(
        replace(loopback_settings(policy.path), redis=url), policy=policy, registry=CollectorRegistry()
    )
    try:
        assert (await admin_status(gateway)).mode_store_connected
    finally:
        await gateway.stop(0)


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


@pytest.mark.parametrize("shared_url", ["redis"], indirect=True)
async def test_after_a_burst_of_flips_every_replica_reports_the_last(start: Start, monkeypatch) -> None:
    """An announcement is followed at once and the report made after it by one task, several announcements
    making one report more (fleet.py): the last report written is the newest state. The periodic re-read,
    which reports too, is put out of the test's reach."""
    monkeypatch.setattr(fleet, "REREAD_SECONDS", 3600.0)
    first, second = await start("replica-a"), await start("replica-b")
    # Twenty at once, through both replicas: announcements arrive while reports are on their way.
    await asyncio.gather(
        *(
            set_mode((first, second)[flip % 2], pb.MODE_REJECT if flip % 3 else pb.MODE_OBSERVE, reason=f"INC-{flip}")
            for flip in range(20)
        )
    )

    async def every_replica_reports_what_it_enforces() -> bool:
        assert isinstance(first.control, fleet.SharedModes)
        await first.control.reread()  # replica a reports, and reads the others' reports
        found = {r.replica_id: r.modes.get("refund_order") for r in (await admin_status(first)).replicas}
        enforced = {r.settings.replica_id: r.modes.mode_for("refund_order").value for r in (first, second)}
        return found == enforced and len(set(enforced.values())) == 1

    await eventually(every_replica_reports_what_it_enforces, seconds=10)


@pytest.mark.parametrize("shared_url", ["redis"], indirect=True)  # one redis-server, killed and started again
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
