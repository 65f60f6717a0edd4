"""A Redis Cluster that fails over: two gateways on 3 primaries with a replica each (real processes on loopback).
The primary holding the modes is killed in the middle of a stream of mode changes; the Cluster promotes its
replica; the gateways follow it, Validate answers throughout, and no change answered as durable is lost."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest

from argwatch.server.modes.fleet import CLUSTER_KEYS
from argwatch.server.process.app import RunningGateway
from argwatch.server.state.redis_connect import STORE_ERRORS, close_client, redis_client
from tests.conftest import SourceServer
from tests.redis_server import RedisCluster, start_cluster
from tests.service.fleet_traffic import Changes, change_modes, fleet_on, the_fleet_agrees, validate_throughout
from tests.service.helpers import admin_status, eventually, stored_audit


@pytest.fixture
def cluster(tmp_path) -> Iterator[RedisCluster]:
    # A primary silent for 500 ms is failed over (the default, 15 s, would outlast the test).
    started = start_cluster(str(tmp_path / "cluster"), replicas=1, node_timeout_ms=500)
    yield started
    started.stop()


@pytest.fixture
async def fleet(tmp_path, source: SourceServer, cluster: RedisCluster) -> AsyncIterator[list[RunningGateway]]:
    async with fleet_on(str(tmp_path), source.target, cluster.url) as started:
        yield started


def audited_on(port: int) -> list[str]:
    """The reasons in the fleet's audit as the Redis on `port` holds it."""
    return [entry["reason"] for entry in stored_audit(port, CLUSTER_KEYS)]


async def test_the_primary_of_the_modes_killed_mid_changes_loses_no_change_answered_as_durable(
    cluster: RedisCluster, fleet: list[RunningGateway]
) -> None:
    changes, answered = Changes(), [0, 0]
    stop = asyncio.Event()
    flipping = asyncio.create_task(change_modes(fleet, changes, stop))
    validating = asyncio.create_task(validate_throughout(fleet, answered, stop))
    try:
        await eventually(lambda: len(changes.durable) >= 6, seconds=15)
        # Each was confirmed by the primary's replica (WAIT 1): the Cluster's primaries have replicas.
        assert not changes.warned
        primary = cluster.primary_of(CLUSTER_KEYS.modes)
        replica = cluster.replica_of(primary)
        primary.kill()  # SIGKILL, while the changes keep coming

        async def promoted() -> bool:
            return cluster.serving(CLUSTER_KEYS.modes) is replica

        await eventually(promoted, seconds=20)
        answered_in_gap, made_before = list(answered), len(changes.durable) + len(changes.warned)

        async def changes_made_on_the_new_primary() -> bool:
            return len(changes.durable) + len(changes.warned) >= made_before + 3

        await eventually(changes_made_on_the_new_primary, seconds=20)
        stop.set()
        await asyncio.gather(flipping, validating)  # raises if a Validate failed at any moment
    finally:
        stop.set()
        for task in (flipping, validating):
            task.cancel()
        await asyncio.gather(flipping, validating, return_exceptions=True)

    # Validate answered on both gateways, during the failover too.
    assert all(count > 0 for count in answered_in_gap) and answered[0] > answered_in_gap[0]
    # Every change answered as durable before the kill is on the promoted replica, and so is every change made
    # since (the new primary has no replica: nothing is left to fail over to, so no answer warns). A change
    # answered with the warning while the primary was dying may be lost, on every gateway alike.
    must_keep = set(changes.durable)
    assert must_keep <= set(audited_on(replica.port))

    await eventually(lambda: the_fleet_agrees(fleet, must_keep), seconds=10)
    assert all([(await admin_status(gateway)).mode_store_connected for gateway in fleet])
    assert len({gateway.modes.mode_for("refund_order") for gateway in fleet}) == 1


async def test_a_client_closed_after_a_node_died_leaves_no_connection_open(tmp_path) -> None:
    # redis-py's Cluster client, after a node's connection error and until its next command, closes nothing
    # on aclose (it waits to learn the layout again): a gateway stopped after a failover left every node's
    # connections open, which CI saw as unclosed sockets collected in a later test.
    cluster = start_cluster(str(tmp_path / "cluster"))
    try:
        client = redis_client(cluster.url, timeout=0.5, connect_timeout=0.5)
        for number in range(30):  # keys on every primary: each node, and each startup node, holds a connection
            await client.set(f"key-{number}", "1")
        cluster.primary_of("key-0").kill()
        with pytest.raises(STORE_ERRORS):
            await client.get("key-0")
        await close_client(client)
        ports = [str(node.port) for node in cluster.nodes]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del client
            gc.collect()
        left_open = [str(w.message) for w in caught if any(port in str(w.message) for port in ports)]
        assert not left_open
    finally:
        cluster.stop()
