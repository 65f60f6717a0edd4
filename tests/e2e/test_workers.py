"""`argwatch serve --workers 2`: two processes share the Gateway port; each has its own metrics and Admin port;
modes agree through Redis; SIGTERM stops both. And a lone gateway refuses a Gateway port already in use."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.process.settings import Settings
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2_grpc
from argwatch.v1 import gateway_pb2 as pb
from tests.e2e.test_serve_process import ARGWATCH, EXAMPLES
from tests.e2e.waiting import until as wait_until
from tests.redis_server import RedisProcess, start_redis

pytestmark = pytest.mark.e2e


def free_run(count: int) -> int:
    """A port p with p .. p+count-1 all free on loopback."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count >= 65535:
            continue
        try:
            held = []
            for port in range(first, first + count):
                holder = socket.socket()
                held.append(holder)
                holder.bind(("127.0.0.1", port))
            return int(first)
        except OSError:
            continue
        finally:
            for holder in held:
                holder.close()
    raise RuntimeError("no run of free ports")


def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    wait_until(condition, seconds, what, tolerate=(grpc.RpcError, OSError))


@pytest.fixture
def policy(tmp_path) -> str:
    shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), tmp_path / "value_sets.yaml")
    (tmp_path / "policy.yaml").write_text(
        "sources: {local: {file: value_sets.yaml}}\n"
        "value_sets: {wms.warehouses: {source: local}}\n"
        "tools: {transfer_stock: {mode: reject, arguments: {warehouse_code: {value_set: wms.warehouses}}}}\n"
    )
    return str(tmp_path / "policy.yaml")


@pytest.fixture
def redis(tmp_path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


def _logged(folder: Path) -> list[dict[str, Any]]:
    from argwatch.server.decisions.reader import LineFilter, ReadCounts, read_lines

    return list(read_lines(folder, LineFilter(), ReadCounts()))


def status(admin: str) -> admin_pb2.GetStatusResponse:
    with grpc.insecure_channel(admin) as channel:
        found: admin_pb2.GetStatusResponse = admin_pb2_grpc.AdminStub(channel).GetStatus(
            admin_pb2.GetStatusRequest(), timeout=2
        )
        return found


def decisions(metrics_port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    return sum(float(v) for v in re.findall(r"^argwatch_decisions_total\{[^}]*\} (\S+)$", body, re.MULTILINE))


def test_two_workers_share_the_port_count_apart_and_agree_on_modes(policy: str, redis: RedisProcess, tmp_path) -> None:
    port, admin, metrics = free_run(1), free_run(2), free_run(2)
    log = open(tmp_path / "workers.log", "w")  # noqa: SIM115 (closed below)
    parent = subprocess.Popen(
        [ARGWATCH, "serve", "--policy", policy, "--redis", redis.url, "--workers", "2",
         "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
         "--metrics-listen", f"127.0.0.1:{metrics}", "--grace-seconds", "1",
         "--decision-log", str(tmp_path / "decisions")],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        admins = [f"127.0.0.1:{admin}", f"127.0.0.1:{admin + 1}"]
        until(lambda: all(status(a).replica_id.endswith(f"-w{i}") for i, a in enumerate(admins)), 30, "both workers up")
        for n in range(100):  # a new connection each: the kernel spreads them over the workers
            with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
                verdict = gateway_pb2_grpc.GatewayStub(channel).Validate(
                    pb.ValidateRequest(
                        tool="transfer_stock", call_id=f"c-{n}", arguments_json=orjson.dumps({"warehouse_code": "X1"})
                    ),
                    timeout=5,
                )
                assert verdict.decision == pb.DECISION_REJECT
        counts = [decisions(metrics), decisions(metrics + 1)]
        assert sum(counts) == 100 and min(counts) > 0, counts  # each worker's own endpoint; together, every call

        with grpc.insecure_channel(admins[0]) as channel:
            admin_pb2_grpc.AdminStub(channel).SetMode(
                admin_pb2.SetModeRequest(tool="transfer_stock", mode=pb.MODE_OBSERVE, reason="INC-13"), timeout=5
            )
        until(
            lambda: all(next(t for t in status(a).tools if t.tool == "transfer_stock").mode == pb.MODE_OBSERVE
                        for a in admins),
            5, "the flip on both workers",
        )  # fmt: skip
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 0
        for address in admins:  # both workers gone
            with pytest.raises(grpc.RpcError):
                status(address)
        # Each worker wrote its own folder (one writer a file), hashing with the one key the parent made; read
        # back together, merged by time.
        folder = tmp_path / "decisions"
        per_worker = [_logged(folder / f"w{index}") for index in range(2)]
        assert sorted(len(lines) for lines in per_worker) == sorted(counts), (per_worker, counts)
        assert not (folder / "w0" / ".hmac-key").exists() and (folder / ".hmac-key").exists()
        digests = {line["arguments"]["warehouse_code"] for lines in per_worker for line in lines}
        assert len(digests) == 1  # the same value, the same digest, whichever worker judged it
        merged = subprocess.run([ARGWATCH, "decisions", "grep", str(folder), "--json"], capture_output=True, check=True)
        times = [orjson.loads(line)["ts"] for line in merged.stdout.splitlines()]
        assert len(times) == 100 and times == sorted(times)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        log.close()


def test_workers_without_redis_are_refused_with_the_reason(policy: str) -> None:
    refused = subprocess.run(
        [ARGWATCH, "serve", "--policy", policy, "--workers", "2", "--listen", "127.0.0.1:50999"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--workers above 1 needs --redis" in refused.stderr


async def test_a_lone_gateway_refuses_a_port_another_gateway_holds(policy: str) -> None:
    """Without --workers, SO_REUSEPORT is off: a second gateway on the port fails instead of taking half the calls."""
    settings = Settings(policy=policy, listen="127.0.0.1:0", admin_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
    first = await build_gateway(settings, policy=load_policy(policy), registry=CollectorRegistry())
    try:
        taken = replace(settings, listen=f"127.0.0.1:{first.port}")
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            await build_gateway(taken, policy=load_policy(policy), registry=CollectorRegistry())
    finally:
        await first.stop(0)
