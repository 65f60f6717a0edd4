"""Several replicas on a real redis-server: shared pulled sets and repair state; Redis lost mid-traffic."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway, make_fetcher
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, loopback_settings, make_policy
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import gateway_stub, request, value
from tests.service.scripted_source import ScriptedSource, serve
from tests.service.test_provider import codes, scripted_policy


@pytest.fixture
def redis(tmp_path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


async def test_two_replicas_pull_a_set_from_the_source_once(tmp_path, redis: RedisProcess) -> None:
    scripted = ScriptedSource({"s.codes": codes(3, "A", "B")}, can_watch=False)
    server, target = await serve(scripted)
    providers, caches = [], []
    try:
        for _ in range(2):
            policy = scripted_policy(tmp_path, target, watch=False)
            metrics = GatewayMetrics(CollectorRegistry())
            shared = SharedCache(redis_from_url(redis.url), metrics)
            assert await shared.start()
            caches.append(shared)
            provider = ValueSetProvider(
                policy,
                {name: make_fetcher(config) for name, config in policy.sources.items()},
                shared,
                metrics,
            )
            assert await provider.start(5.0) == []
            providers.append(provider)
        assert [p.read("s.codes").snapshot.members for p in providers] == [{"A", "B"}] * 2  # type: ignore[union-attr]
        assert scripted.fetches == 1  # the second replica found it in Redis
    finally:
        for provider in providers:
            await provider.close()
        for shared in caches:
            await shared.close()
        await server.stop(0)


async def test_repair_works_on_another_replica(tmp_path, source: SourceServer, redis: RedisProcess) -> None:
    policy = make_policy(str(tmp_path), source.target)
    replicas = [
        await build_gateway(
            loopback_settings(policy.path),
            policy=policy,
            registry=CollectorRegistry(),
            cache=SharedCache(redis_from_url(redis.url), GatewayMetrics(CollectorRegistry())),
        )
        for _ in range(2)
    ]
    try:
        channel_a, stub_a = gateway_stub(replicas[0])
        channel_b, stub_b = gateway_stub(replicas[1])
        async with channel_a, channel_b:
            rejected = await stub_a.Validate(request("refund_order", {"reason_code": "NOPE"}), timeout=5)
            assert rejected.decision == pb.DECISION_REJECT
            repair = await stub_b.Repair(pb.RepairRequest(call_id=rejected.call_id), timeout=5)
        assert '"NOPE" is not a valid value' in repair.message
    finally:
        for replica in replicas:
            await replica.stop(0)


async def test_redis_killed_mid_traffic_loses_no_call_and_blocks_none(
    gateway_factory: GatewayFactory,
    tmp_path,
    source: SourceServer,
    redis: RedisProcess,
) -> None:
    registry = CollectorRegistry()
    policy = make_policy(str(tmp_path), source.target)
    metrics_for_cache = GatewayMetrics(registry)
    gateway = await build_gateway(
        loopback_settings(policy.path),
        policy=policy,
        registry=CollectorRegistry(),
        cache=SharedCache(redis_from_url(redis.url), metrics_for_cache),
    )
    verdicts, slowest = [], 0.0
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for i in range(300):
                if i == 100:
                    redis.kill()
                code = "NOPE" if i % 2 else "DAMAGED_ITEM"  # every other call is rejected: repair state is written
                started = time.perf_counter()
                response = await stub.Validate(
                    request("refund_order", {"reason_code": code}, conversation=f"c{i}"), timeout=5
                )
                slowest = max(slowest, time.perf_counter() - started)
                verdicts.append(response.decision)
            # A call rejected while Redis is down can still be repaired on this replica.
            last = await stub.Validate(request("refund_order", {"reason_code": "NOPE"}), timeout=5)
            repair = await stub.Repair(pb.RepairRequest(call_id=last.call_id), timeout=5)
    finally:
        await gateway.stop(0)
    assert len(verdicts) == 300
    assert verdicts.count(pb.DECISION_REJECT) == 150 and verdicts.count(pb.DECISION_ALLOW) == 150
    assert '"NOPE"' in repair.message
    errors = sum(value(registry, "argwatch_shared_cache_errors_total", operation=op) for op in ("get", "set"))
    assert errors >= 1
    # Not a speed test: a hang detector. A Redis operation is bounded at 50 ms, then skipped for 1 s.
    assert slowest < 2.0, f"a call waited {slowest:.2f}s"


async def test_passing_calls_ask_redis_nothing_unless_a_repair_is_open_somewhere(
    tmp_path, source: SourceServer, redis: RedisProcess
) -> None:
    from dataclasses import replace

    import redis as redis_client

    from tests.service.helpers import eventually

    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    first, second = [
        await build_gateway(replace(loopback_settings(policy.path), redis=redis.url, replica_id=name), policy=policy,
                            registry=CollectorRegistry())
        for name in ("a", "b")
    ]  # fmt: skip
    counter = redis_client.Redis(port=redis.port)

    def gets() -> int:
        stats = counter.info("commandstats").get("cmdstat_get", {})
        return int(stats.get("calls", 0))

    try:

        async def following() -> bool:
            return first.repairs._following and second.repairs._following

        await eventually(following, seconds=5)
        channel, stub = gateway_stub(second)
        async with channel:
            before = gets()
            for n in range(50):  # passing calls in conversations with no open repair
                await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, conversation=f"c{n}"))
            assert gets() == before  # not one round trip to Redis
            rejected_channel, rejecting = gateway_stub(first)
            async with rejected_channel:
                await rejecting.Validate(request("refund_order", {"reason_code": "MADE_UP"}, conversation="c7"))

            async def announced() -> bool:
                return "c7\0refund_order" in second.repairs._open_anywhere

            await eventually(announced, seconds=5)
            before_repair = gets()
            await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, conversation="c7"))
        assert value(second.registry, "tool_argument_repair_succeeded_total", tool="refund_order") == 1
        assert gets() == before_repair + 1  # one look-up: for the repair it knew was open elsewhere
    finally:
        counter.close()
        await first.stop(0)
        await second.stop(0)


async def test_add_then_set_is_one_script_that_writes_the_second_key_only_with_the_first(
    redis: RedisProcess,
) -> None:
    """What the repeat check relies on: a held first key leaves the second unwritten (a refused repeat's
    call id must never be reportable), and what the script writes, aiocache reads back."""
    from redis.asyncio import Redis

    cache = SharedCache(redis_from_url(redis.url), GatewayMetrics(CollectorRegistry()), timeout=5.0)
    other = SharedCache(redis_from_url(redis.url), GatewayMetrics(CollectorRegistry()), timeout=5.0)  # a replica
    client = Redis(port=redis.port)
    try:
        assert await cache.add_then_set("op:1", "call a", "call:a", "op:1", ttl=60.0)
        assert await other.get("op:1") == "call a" and await other.get("call:a") == "op:1"
        assert not await other.add_then_set("op:1", "call b", "call:b", "op:1", ttl=60.0)
        assert await other.get("call:b") is None and await cache.get("op:1") == "call a"
        ttls = [await client.pttl(key) for key in ("argwatch:op:1", "argwatch:call:a")]  # aiocache's namespace
        assert all(55_000 < ttl <= 60_000 for ttl in ttls), ttls  # both keys, both with the window
    finally:
        await client.aclose()
        await cache.close()
        await other.close()
