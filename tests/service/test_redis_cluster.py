"""The shared cache on a real Redis Cluster of 3 primaries: the operations script's two keys share a slot
(hash tags), repeats are caught across replicas, and announcements reach a subscriber on any node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes.fleet import CLUSTER_KEYS, SharedModes
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode, SideEffect
from argwatch.server.process.app import build_gateway
from argwatch.server.state.operations import OperationLog
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.verdict.repeats import OperationOutcome
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.redis_server import RedisCluster, ask, free_port
from tests.service.helpers import admin_status, admin_stub, value

REFUND = SideEffect(("order_id",), 300.0, "get_refund_status")


@pytest.fixture
async def replicas(redis_cluster: RedisCluster) -> AsyncIterator[list[tuple[SharedCache, CollectorRegistry]]]:
    """Two replicas' shared caches on the Cluster, each with its own metrics."""
    redis_cluster.flushall()
    made = []
    for _ in range(2):
        registry = CollectorRegistry()
        cache = SharedCache(redis_from_url(redis_cluster.url), GatewayMetrics(registry), timeout=5.0)
        assert await cache.start()
        made.append((cache, registry))
    yield made
    for cache, _ in made:
        await cache.close()


def errors(registry: CollectorRegistry) -> float:
    return sum(
        sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == "argwatch_shared_cache_errors_total"
    )


async def test_a_repeat_on_another_replica_is_caught_and_its_outcome_reported_anywhere(
    redis_cluster: RedisCluster, replicas: list[tuple[SharedCache, CollectorRegistry]]
) -> None:
    (first, first_metrics), (second, second_metrics) = replicas
    for conversation in ("c-1", "c-2", "c-3", "c-{4}"):  # several conversations: several slots
        sighting = await OperationLog(first).sight("aw1_k", "refund_order", conversation, "call-1", REFUND, runs=True)
        assert sighting.earlier is None and sighting.shared
        repeat = await OperationLog(second).sight("aw1_k", "refund_order", conversation, "call-2", REFUND, runs=False)
        assert repeat.is_repeat and repeat.shared
        reported = await OperationLog(second).report(conversation, "call-1", OperationOutcome.SUCCEEDED)
        assert reported is not None and reported.outcome is OperationOutcome.SUCCEEDED
    # Every write and the script reached Redis (no fallback to local memory), spread over the primaries.
    assert errors(first_metrics) == errors(second_metrics) == 0
    holding = [ask(node.port, "DBSIZE") for node in redis_cluster.nodes]
    assert sum(1 for keys in holding if keys) >= 2
    assert value(first_metrics, "argwatch_shared_cache_rejected_total", reason="not_json") == 0


async def test_keys_written_together_carry_one_hash_tag_only_in_a_cluster(
    replicas: list[tuple[SharedCache, CollectorRegistry]],
) -> None:
    cache, _ = replicas[0]
    tag = cache.keys_together("conversation {with braces}")
    assert tag.startswith("{") and tag.endswith("}") and "braces" not in tag  # a digest: the caller picks no slot
    assert cache.keys_together("conversation {with braces}") == tag
    assert SharedCache(None, GatewayMetrics(CollectorRegistry())).keys_together("anything") == ""


async def test_an_announcement_reaches_subscribers_on_every_node(
    replicas: list[tuple[SharedCache, CollectorRegistry]],
) -> None:
    """Classic PUBLISH is broadcast over the Cluster bus: each subscription (on a node picked at random) hears it."""
    cache, _ = replicas[0]
    subscriptions = [cache.pubsub() for _ in range(6)]
    try:
        for pubsub in subscriptions:
            assert pubsub is not None
            await pubsub.subscribe("argwatch:test")
            confirmed = await pubsub.get_message(timeout=5)
            assert confirmed is not None and confirmed["type"] == "subscribe"
        await cache.publish("argwatch:test", "open:c\0refund_order")
        for pubsub in subscriptions:
            assert pubsub is not None
            message = await pubsub.get_message(timeout=5)
            assert message is not None and message["data"] == b"open:c\0refund_order"
    finally:
        for pubsub in subscriptions:
            if pubsub is not None:
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated


async def test_a_gateway_on_a_cluster_that_does_not_answer_serves_and_says_so(tmp_path, source: SourceServer) -> None:
    """redis-py reports a Cluster it cannot reach with an error of its own (not a RedisError): the gateway
    starts all the same, reports the mode store unreachable, and refuses a change as with one Redis down."""
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    port = free_port()
    settings = replace(loopback_settings(policy.path), redis=f"redis+cluster://127.0.0.1:{port}")
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        status = await admin_status(gateway)
        assert not status.mode_store_connected and f"127.0.0.1:{port}" in status.mode_store_error
        channel, admin = admin_stub(gateway)
        async with channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await admin.SetMode(
                    admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9"),
                    metadata=(("x-argwatch-actor", "ana@oncall"),),
                    timeout=5,
                )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "unreachable" in (refused.value.details() or "")
    finally:
        await gateway.stop(0)


@dataclass(frozen=True)
class SlotMove:
    """A slot on its way from one primary to another."""

    slot: int
    source: int  # ports
    target: int
    target_id: str


def start_moving_slot(cluster: RedisCluster, key: str, only: str | None = None) -> SlotMove:
    """The first half of a resharding of `key`'s slot (what redis-cli --cluster reshard does): the slot marked
    migrating and importing, and its keys migrated (`only`: that one, as a resharding's first MIGRATE of a few
    keys leaves the others behind until the next); the source answers ASK for them until `finish_moving`."""
    slot = cluster.slot_of(key)
    layout = cluster.layout()
    source = next(line for line in layout.values() if line.primary and line.holds(slot))
    target = next(line for line in layout.values() if line.primary and line.port != source.port)
    ask(target.port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", source.node_id)
    ask(source.port, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", target.node_id)
    keys = ask(source.port, "CLUSTER", "GETKEYSINSLOT", str(slot), "1000")
    assert isinstance(keys, list)
    for moving in keys:
        assert isinstance(moving, bytes)
        if only is None or moving.decode() == only:
            ask(source.port, "MIGRATE", "127.0.0.1", str(target.port), moving.decode(), "0", "5000")
    return SlotMove(slot, source.port, target.port, target.node_id)


def migrate_the_rest(move: SlotMove) -> None:
    """The keys of the slot still on the source, migrated (the resharding's next MIGRATE)."""
    keys = ask(move.source, "CLUSTER", "GETKEYSINSLOT", str(move.slot), "1000")
    assert isinstance(keys, list)
    for moving in keys:
        assert isinstance(moving, bytes)
        ask(move.source, "MIGRATE", "127.0.0.1", str(move.target), moving.decode(), "0", "5000")


def finish_moving(cluster: RedisCluster, move: SlotMove) -> None:
    """The slot assigned to its new primary on every node: the end of the resharding."""
    for node in cluster.nodes:
        ask(node.port, "CLUSTER", "SETSLOT", str(move.slot), "NODE", move.target_id)


def move_slot(cluster: RedisCluster, key: str) -> None:
    """Reshards the slot of `key` to another primary, its keys with it."""
    finish_moving(cluster, start_moving_slot(cluster, key))


async def test_a_mode_change_after_its_slot_moved_reaches_the_new_primary(
    tmp_path, source: SourceServer, redis_cluster: RedisCluster
) -> None:
    """The first command to the slot's old primary is answered MOVED: the change is made on the new one, not
    refused as though the Cluster were unreachable."""
    redis_cluster.flushall()
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    settings = replace(loopback_settings(policy.path), redis=redis_cluster.url)
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            for number, mode in enumerate((pb.MODE_OBSERVE, pb.MODE_REJECT)):
                if number:
                    # Once the re-read the first change's announcement started is over (it would learn the
                    # new layout first), so the change itself meets MOVED: a re-read waits for the one under way.
                    assert isinstance(gateway.control, SharedModes)
                    await gateway.control.reread()
                    move_slot(redis_cluster, CLUSTER_KEYS.modes)
                await admin.SetMode(
                    admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=f"INC-{number}"),
                    metadata=(("x-argwatch-actor", "ana@oncall"),),
                    timeout=5,
                )
        assert [change.reason for change in gateway.modes.changes()] == ["INC-1", "INC-0"]  # newest first
        assert (await admin_status(gateway)).mode_store_connected
    finally:
        await gateway.stop(0)


async def test_a_mode_change_while_its_slot_migrates_is_made_on_the_importing_primary(
    tmp_path, source: SourceServer, redis_cluster: RedisCluster
) -> None:
    """Mid-resharding, the modes key has already gone to the importing primary: the old one answers ASK to
    the transaction, which then runs there after ASKING (once refused as a store error); every replica reads
    the change, during the migration and after it."""
    redis_cluster.flushall()
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    settings = replace(loopback_settings(policy.path), redis=redis_cluster.url)
    gateways = [
        await build_gateway(replace(settings, replica_id=name), policy=policy, registry=CollectorRegistry())
        for name in ("replica-a", "replica-b")
    ]
    try:
        first, second = gateways
        channel, admin = admin_stub(first)
        async with channel:

            async def set_mode(mode: pb.Mode, reason: str) -> None:
                await admin.SetMode(
                    admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=reason),
                    metadata=(("x-argwatch-actor", "ana@oncall"),),
                    timeout=5,
                )

            await set_mode(pb.MODE_OBSERVE, "INC-0")
            move = start_moving_slot(redis_cluster, CLUSTER_KEYS.modes)
            try:
                await set_mode(pb.MODE_REJECT, "INC-1")
                assert first.modes.mode_for("refund_order") is Mode.REJECT
                # Read back as any replica reads it (redis-py follows the ASK for a single command).
                assert isinstance(second.control, SharedModes)
                await second.control.reread()
                assert second.modes.mode_for("refund_order") is Mode.REJECT
                with pytest.raises(RuntimeError, match="ASK"):  # not on the old primary: it sends the reader on
                    ask(move.source, "GET", CLUSTER_KEYS.modes)
            finally:
                finish_moving(redis_cluster, move)
            await set_mode(pb.MODE_OBSERVE, "INC-2")
        assert [change.reason for change in first.modes.changes()] == ["INC-2", "INC-1", "INC-0"]
        await second.control.reread()
        assert [change.reason for change in second.modes.changes()] == ["INC-2", "INC-1", "INC-0"]
        assert all([(await admin_status(gateway)).mode_store_connected for gateway in gateways])
    finally:
        for gateway in gateways:
            await gateway.stop(0)


@pytest.mark.parametrize("writes", ["heads", "whole documents"])
@pytest.mark.parametrize("moved_first", ["nothing", CLUSTER_KEYS.modes, CLUSTER_KEYS.audit])
async def test_a_mode_change_while_the_slots_keys_are_split_between_two_primaries_waits_for_the_rest(
    tmp_path, source: SourceServer, redis_cluster: RedisCluster, moved_first: str, writes: str
) -> None:
    """The state is a head and two sorted sets in one slot: mid-resharding one may have moved and the others
    not yet. The importing primary answers TRYAGAIN to a transaction naming both, and the source ASK for a key
    it no longer holds (or never held: the refusals' set of a fleet that refused nothing). The change is tried
    again, from the source (not refused as though the Cluster were unreachable, nor made on the importing
    primary beside a head it lacks), and made once the rest arrived; the migration of every key succeeds."""
    redis_cluster.flushall()
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    settings = replace(loopback_settings(policy.path), redis=redis_cluster.url, replica_id="replica-a")
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        control = gateway.control
        assert isinstance(control, SharedModes)
        await control.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-0")
        await control.reread()  # its report read: the state is a head, with the sets beside it
        await control.set_mode("refund_order", Mode.REJECT, actor="ana", reason="INC-1")
        # Whole documents: as while a replica of a release before format 2 reports, the head still stored.
        control._fleet_reads_heads = writes == "heads"
        control._synced = None  # not in step (as after a restart): it reads the sets, whose keys may have moved
        move = start_moving_slot(redis_cluster, CLUSTER_KEYS.modes, only=moved_first)
        failed: list[Exception] = []

        def migrate() -> None:
            try:
                migrate_the_rest(move)
            except RuntimeError as error:  # BUSYKEY: a key made on the importing primary meanwhile
                failed.append(error)

        try:
            asyncio.get_running_loop().call_later(0.05, migrate)
            await control.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-2")
            await asyncio.sleep(0.1)
        finally:
            finish_moving(redis_cluster, move)
        assert failed == []
        assert [change.reason for change in gateway.modes.changes()] == ["INC-2", "INC-1", "INC-0"]
        assert gateway.modes.mode_for("refund_order") is Mode.OBSERVE
        assert (await admin_status(gateway)).mode_store_connected
    finally:
        await gateway.stop(0)


async def test_an_empty_cluster_whose_slot_is_left_open_is_read_as_empty_not_unreachable(
    redis_cluster: RedisCluster,
) -> None:
    """A first start (or a Cluster restarted empty) while the slot of the modes is open (a resharding under
    way, or one that failed and was not fixed): the source answers ASK to the head itself, and the importing
    primary has none either. That is no state, not a split slot to wait out."""
    redis_cluster.flushall()
    move = start_moving_slot(redis_cluster, CLUSTER_KEYS.modes)  # no keys: nothing to migrate, the slot open
    policy = parse_policy(b"tools: {refund_order: {mode: reject}}\n", "/p.yaml")
    replica = SharedModes(
        ModeStore(policy), redis_cluster.url, GatewayMetrics(CollectorRegistry()), replica_id="r1", report=dict
    )
    try:
        await replica.start()
        assert replica.status() == (True, "")
        await replica.reread()
        assert replica.status() == (True, "")
    finally:
        finish_moving(redis_cluster, move)
    await replica.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-1")
    await replica.close()
