"""Three gateway processes sharing a real redis-server: one flip is enforced by all; Redis killed and restarted loses
no call and keeps the modes; a replica killed drops out of the fleet view. The fleet's tests also run with the
three on a Redis Cluster of 3 primaries (--redis redis+cluster://...)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import orjson
import pytest

from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2_grpc
from argwatch.v1 import gateway_pb2 as pb
from tests.e2e.test_serve_process import ARGWATCH, EXAMPLES, read_until
from tests.e2e.waiting import until
from tests.redis_server import RedisCluster, RedisProcess, start_redis

pytestmark = pytest.mark.e2e


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[str]
    target: str
    admin: str
    drain: threading.Thread  # keeps reading its log, so it never blocks on a full pipe

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.drain.join(timeout=10)  # the log reaches EOF once the process is gone
        if self.process.stderr is not None:
            self.process.stderr.close()


def start_replica(folder: str, redis_url: str, name: str) -> Replica:
    process = subprocess.Popen(
        [ARGWATCH, "serve", "--policy", os.path.join(folder, "policy.yaml"), "--redis", redis_url,
         "--replica-id", name, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0", "--grace-seconds", "1"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stderr is not None
    match = read_until(process.stderr, r"on 127\.0\.0\.1:(\d+), admin on 127\.0\.0\.1:(\d+)")
    stream = process.stderr
    drain = threading.Thread(target=lambda: [None for _ in stream], daemon=True)
    drain.start()
    return Replica(name, process, f"127.0.0.1:{match.group(1)}", f"127.0.0.1:{match.group(2)}", drain)


def validate(target: str) -> pb.ValidateResponse:
    with grpc.insecure_channel(target) as channel:
        response: pb.ValidateResponse = gateway_pb2_grpc.GatewayStub(channel).Validate(
            pb.ValidateRequest(tool="transfer_stock", arguments_json=orjson.dumps({"warehouse_code": "XXX-9"})),
            timeout=2,
        )
        return response


def admin_call(target: str, method: str, message: object) -> object:
    with grpc.insecure_channel(target) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        return getattr(stub, method)(message, timeout=5, metadata=(("x-argwatch-actor", "ana@oncall"),))


Fleet = tuple[RedisProcess | None, list[Replica]]  # the redis-server (None on the Cluster), the replicas


@pytest.fixture(params=["redis", "cluster"])
def fleet(tmp_path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), tmp_path / "value_sets.yaml")
    (tmp_path / "policy.yaml").write_text(
        "sources: {local: {file: value_sets.yaml}}\n"
        "value_sets: {wms.warehouses: {source: local}}\n"
        "tools: {transfer_stock: {mode: reject, arguments: {warehouse_code: {value_set: wms.warehouses}}}}\n"
    )
    redis: RedisProcess | None = None
    if request.param == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        url = cluster.url
    else:
        redis = start_redis(str(tmp_path))
        url = redis.url
    replicas: list[Replica] = []
    try:
        replicas = [start_replica(str(tmp_path), url, f"replica-{n}") for n in range(3)]
        yield redis, replicas
    finally:
        for replica in replicas:
            replica.stop()
        if redis is not None:
            redis.kill()


@pytest.mark.parametrize("fleet", ["cluster"], indirect=True)  # on one redis-server: the test below
def test_a_flip_through_one_replica_and_its_clear_through_another_reach_all_three(fleet: Fleet) -> None:
    _, replicas = fleet
    assert {validate(r.target).decision for r in replicas} == {pb.DECISION_REJECT}
    admin_call(
        replicas[0].admin,
        "SetMode",
        admin_pb2.SetModeRequest(tool="transfer_stock", mode=pb.MODE_OBSERVE, reason="INC-12: false rejects"),
    )
    until(lambda: all(validate(r.target).mode == pb.MODE_OBSERVE for r in replicas), 5, "the flip on every replica")
    admin_call(replicas[2].admin, "SetMode", admin_pb2.SetModeRequest(tool="transfer_stock", reason="INC-12 over"))
    until(lambda: all(validate(r.target).mode == pb.MODE_REJECT for r in replicas), 5, "the clear on every replica")
    status = admin_call(replicas[1].admin, "GetStatus", admin_pb2.GetStatusRequest())
    assert status.mode_store_connected  # type: ignore[attr-defined]


@pytest.mark.parametrize("fleet", ["redis"], indirect=True)  # one redis-server, killed and started again
def test_one_flip_is_enforced_by_all_three_and_redis_restarts_cost_no_call(fleet: Fleet, tmp_path) -> None:
    redis, replicas = fleet
    assert redis is not None
    assert {validate(r.target).decision for r in replicas} == {pb.DECISION_REJECT}
    admin_call(
        replicas[0].admin,
        "SetMode",
        admin_pb2.SetModeRequest(tool="transfer_stock", mode=pb.MODE_OBSERVE, reason="INC-12: false rejects"),
    )
    until(lambda: all(validate(r.target).mode == pb.MODE_OBSERVE for r in replicas), 5, "the flip on every replica")

    # Calls keep flowing to all three while Redis is killed and restarted.
    failures: list[str] = []
    answered = [0]
    modes_seen: set[int] = set()
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            for replica in replicas:
                try:
                    modes_seen.add(validate(replica.target).mode)
                    answered[0] += 1
                except grpc.RpcError as error:
                    failures.append(f"{replica.name}: {error.code().name}")

    runner = threading.Thread(target=traffic)
    runner.start()
    restarted: list[RedisProcess] = []
    try:
        redis.kill()
        until(
            lambda: not any(admin_call(r.admin, "GetStatus", admin_pb2.GetStatusRequest()).mode_store_connected  # type: ignore[attr-defined]
                            for r in replicas),
            10, "every replica reports the store unreachable",
        )  # fmt: skip
        back = start_redis(str(tmp_path), port=redis.port)  # empty: no persistence
        restarted.append(back)
        until(
            lambda: all(admin_call(r.admin, "GetStatus", admin_pb2.GetStatusRequest()).mode_store_connected  # type: ignore[attr-defined]
                        for r in replicas),
            15, "every replica back on the store",
        )  # fmt: skip
        stop.set()
        runner.join(timeout=30)
        assert failures == [] and answered[0] > 0
        assert modes_seen == {pb.MODE_OBSERVE}  # the override held throughout
        # Caught up: a change now reaches everyone again, through another replica.
        admin_call(replicas[2].admin, "SetMode", admin_pb2.SetModeRequest(tool="transfer_stock", reason="INC-12 over"))
        until(lambda: all(validate(r.target).mode == pb.MODE_REJECT for r in replicas), 5, "the clear on every replica")
    finally:
        stop.set()
        runner.join(timeout=30)
        for server in restarted:
            server.kill()


def test_a_killed_replica_drops_out_of_the_fleet_view(fleet: Fleet) -> None:
    _, replicas = fleet

    def reporting() -> dict[str, bool]:
        status = admin_call(replicas[0].admin, "GetStatus", admin_pb2.GetStatusRequest())
        return {r.replica_id: r.reporting for r in status.replicas}  # type: ignore[attr-defined]

    until(lambda: reporting() == {"replica-0": True, "replica-1": True, "replica-2": True}, 10, "all three listed")
    replicas[2].process.send_signal(signal.SIGKILL)  # no goodbye: its report just stops
    replicas[2].process.wait(timeout=10)
    until(lambda: reporting().get("replica-2") is False, 20, "replica-2 shown as stopped reporting")
    assert reporting()["replica-1"] is True
