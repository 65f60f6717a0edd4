"""The repair loop across two gateway processes sharing a real Redis: rejected on one, repaired on the other."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator

import grpc
import orjson
import pytest

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.e2e.test_serve_process import ARGWATCH, EXAMPLES, read_until
from tests.redis_server import RedisProcess, start_redis

pytestmark = pytest.mark.e2e


@pytest.fixture
def redis(tmp_path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


def test_a_call_rejected_on_one_replica_and_repaired_on_another_counts_succeeded(tmp_path, redis: RedisProcess) -> None:
    shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), tmp_path / "value_sets.yaml")
    (tmp_path / "policy.yaml").write_text(
        "sources: {local: {file: value_sets.yaml}}\n"
        "value_sets: {wms.warehouses: {source: local}}\n"
        "tools: {transfer_stock: {mode: reject, arguments: {warehouse_code: {value_set: wms.warehouses}}}}\n"
    )
    replicas = []
    try:
        for _ in range(2):
            process = subprocess.Popen(
                [
                    ARGWATCH,
                    "serve",
                    "--policy",
                    str(tmp_path / "policy.yaml"),
                    "--redis",
                    redis.url,
                    "--listen",
                    "127.0.0.1:0",
                    "--admin-listen",
                    "127.0.0.1:0",
                    "--metrics-listen",
                    "127.0.0.1:0",
                ],
                stderr=subprocess.PIPE,
                text=True,
            )
            match = read_until(process.stderr, r"on 127\.0\.0\.1:(\d+), admin on .*, metrics on :(\d+)")
            replicas.append((process, f"127.0.0.1:{match.group(1)}", match.group(2)))

        def validate(target: str, code: str) -> pb.ValidateResponse:
            with grpc.insecure_channel(target) as channel:
                response: pb.ValidateResponse = gateway_pb2_grpc.GatewayStub(channel).Validate(
                    pb.ValidateRequest(
                        tool="transfer_stock",
                        arguments_json=orjson.dumps({"warehouse_code": code}),
                        conversation_id="conv-1",
                    ),
                    timeout=5,
                )
                return response

        assert validate(replicas[0][1], "AMS-9").decision == pb.DECISION_REJECT
        assert validate(replicas[1][1], "AMS-1").decision == pb.DECISION_ALLOW

        body = urllib.request.urlopen(f"http://127.0.0.1:{replicas[1][2]}/metrics", timeout=5).read().decode()
        assert re.search(r'tool_argument_repair_succeeded_total\{tool="transfer_stock"\} 1\.0', body)
    finally:
        for process, _, _ in replicas:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
            assert process.stderr is not None
            process.stderr.close()
