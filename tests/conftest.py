"""Shared fixtures: real gRPC servers on 127.0.0.1:0 (a ValueSetSource and the gateway), and a test policy."""

from __future__ import annotations

import os
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.process.settings import Settings
from argwatch.sources import ValueSetCatalog, ValueSetSourceServicer
from argwatch.v1 import sources_pb2_grpc
from tests.redis_server import RedisCluster, start_cluster

REASON_CODES = ("DAMAGED_ITEM", "NOT_RECEIVED", "WRONG_ITEM", "LATE_DELIVERY")
WAREHOUSES = ("AMS-1", "BER-1", "LHR-3")


@dataclass
class SourceServer:
    """A real ValueSetSource gRPC server on loopback, whose sets a test can change or take down."""

    catalog: ValueSetCatalog
    server: grpc.aio.Server
    port: int
    stopped: bool = False

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        # Once only: a second stop of a grpc.aio server can hang the test's teardown.
        if not self.stopped:
            self.stopped = True
            await self.server.stop(0)


async def start_source(catalog: ValueSetCatalog, port: int = 0) -> SourceServer:
    server = grpc.aio.server()
    sources_pb2_grpc.add_ValueSetSourceServicer_to_server(
        ValueSetSourceServicer(catalog, heartbeat_seconds=0.5), server
    )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return SourceServer(catalog, server, bound)


@pytest.fixture
async def source() -> AsyncIterator[SourceServer]:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", REASON_CODES, ["BROKEN"])
    catalog.publish("identity.handles", [f"user{i:04d}" for i in range(500)])
    running = await start_source(catalog)
    yield running
    await running.stop()


def policy_text(
    source_target: str,
    sets_file: str,
    *,
    refund_mode: str = "reject",
    ttl: str = "5m",
    max_staleness: str = "1h",
    failure: str = "open",
    on_stale: str = "enforce",
    watch: str = "true",
    remember: str = "15m",
) -> str:
    return textwrap.dedent(
        f"""
        default_mode: observe
        sources:
          owners:
            grpc: {{target: "{source_target}", timeout: 500ms, watch: {watch}}}
          local:
            file: {sets_file}
        value_sets:
          refunds.reason_codes:
            source: owners
            ttl: {ttl}
            max_staleness: {max_staleness}
            failure: {failure}
            on_stale: {on_stale}
          identity.handles: {{source: owners, ttl: {ttl}, max_staleness: {max_staleness}}}
          wms.warehouses: {{source: local}}
        tools:
          refund_order:
            mode: {refund_mode}
            arguments:
              reason_code:
                value_set: refunds.reason_codes
                hint: If no code fits, ask the user.
          create_ticket:
            arguments:
              assignee: {{value_set: identity.handles, required: false}}
          transfer_stock:
            arguments:
              warehouse_code: {{value_set: wms.warehouses}}
        repair: {{list_limit: 20, nearest: 3, max_attempts: 3, remember: {remember}}}
        sampling: {{rate: 1.0}}
        """
    )


def write_sets_file(folder: str) -> str:
    path = os.path.join(folder, "sets.yaml")
    with open(path, "w") as handle:
        handle.write("wms.warehouses:\n  version: 3\n  members: [" + ", ".join(WAREHOUSES) + "]\n  retired: [LHR-1]\n")
    return path


def make_policy(folder: str, source_target: str, **kwargs: str) -> Policy:
    write_sets_file(folder)
    path = os.path.join(folder, "policy.yaml")
    text = policy_text(source_target, "sets.yaml", **kwargs)
    with open(path, "w") as handle:
        handle.write(text)
    return parse_policy(text.encode(), path)


async def gateway_on(
    folder: os.PathLike[str], text: str, *, reconnect_cap_seconds: float | None = None, **settings: object
) -> RunningGateway:
    """A gateway on loopback on the policy `text`, written to `folder` (its file sources resolve there);
    `settings` replace loopback_settings' fields. The caller stops it."""
    import dataclasses

    path = os.path.join(folder, "policy.yaml")
    policy = parse_policy(text.encode(), path)
    with open(path, "w") as handle:  # noqa: ASYNC230 (a test's setup, before any server runs)
        handle.write(text)
    chosen = dataclasses.replace(loopback_settings(path), **settings)  # type: ignore[arg-type]
    extra = {} if reconnect_cap_seconds is None else {"reconnect_cap_seconds": reconnect_cap_seconds}
    return await build_gateway(chosen, policy=policy, registry=CollectorRegistry(), **extra)  # type: ignore[arg-type]


RECORDS_POLICY = """
    sources:
      orders_db: {{grpc: {{target: "{target}", timeout: 30s}}}}
    tools:
      refund_order:
        mode: reject
        records:
          order: {{source: orders_db, kind: order, id_argument: order_id, failure: closed}}
"""


def loopback_settings(policy_path: str) -> Settings:
    return Settings(
        policy=policy_path,
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
        metrics_listen="127.0.0.1:0",
        grace_seconds=1.0,
        replica_id="test-replica",
    )


GatewayFactory = Callable[..., Awaitable[RunningGateway]]


@pytest.fixture
async def gateway_factory(tmp_path: os.PathLike[str], source: SourceServer) -> AsyncIterator[GatewayFactory]:
    """Starts gateways on loopback against the `source` fixture; stops them all after the test."""
    started: list[RunningGateway] = []

    async def start(settings: Mapping[str, object] | None = None, **policy_options: str) -> RunningGateway:
        """`settings`: Settings fields to change from loopback_settings' (decision_log=..., say)."""
        import dataclasses

        policy = make_policy(str(tmp_path), source.target, **policy_options)
        chosen = dataclasses.replace(loopback_settings(policy.path), **(settings or {}))  # type: ignore[arg-type]
        gateway = await build_gateway(chosen, policy=policy, registry=CollectorRegistry(), reconnect_cap_seconds=0.3)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        await gateway.stop(0)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A Redis Cluster of 3 primaries on loopback, one for the whole run (started when a test first asks for
    it); each test empties it first (RedisCluster.flushall)."""
    started = start_cluster(str(tmp_path_factory.mktemp("redis-cluster")))
    yield started
    started.stop()
