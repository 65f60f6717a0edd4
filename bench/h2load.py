"""Validate against a bare echo driven by h2load (a native HTTP/2 load generator), and `--workers` scaling.

h2load (Debian's nghttp2-client; `make bench` installs it) sends a pre-framed
gRPC body: the same ~260-byte ValidateRequest the Python benchmarks use. A
native client leaves the server more of the two cores than a Python one does.

1. One bench server (bench_server.py) serves Validate and the raw-bytes Echo.
   Rounds alternate Validate and Echo (`--rounds` each, `--requests` per
   round) at 4 connections x 16 streams = 64 in flight. Per side: requests/s,
   p50 and p99 of h2load's per-request times, and server CPU per call (the
   server's own CPU time). The Validate/Echo ratios are taken per adjacent
   pair, and their median is printed.
2. `argwatch serve --workers N` for N = 1, 2 on one port, sharing a real
   redis-server (needed by --workers): requests/s for each N, and the ratio
   to N = 1.

    .venv/bin/python bench/h2load.py [--rounds 5] [--requests 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from validate import HERE, payload, server_cpu_seconds, start_server

from tests.redis_server import start_redis

CONNECTIONS, STREAMS = 4, 16
ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")


def h2load(target: str, path: str, body_file: str, requests: int) -> dict[str, float]:
    binary = shutil.which("h2load")
    if binary is None:
        raise SystemExit("h2load is missing: apt-get install nghttp2-client (make bench installs it)")
    out = subprocess.run(
        [binary, "-n", str(requests), "-c", str(CONNECTIONS), "-m", str(STREAMS),
         "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", body_file, f"http://{target}{path}"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    done = re.search(r"(\d+) succeeded, (\d+) failed", out)
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    times = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    if not (done and rate and times) or int(done.group(2)):
        raise SystemExit(f"h2load failed:\n{out}")
    return {"requests_per_second": float(rate.group(1)), "mean_ms": _ms(times.group(3)), "max_ms": _ms(times.group(2))}


def _ms(text: str) -> float:
    value = float(re.sub(r"[a-z]+$", "", text))
    return (
        value / 1000
        if text.endswith("us")
        else value * 1000
        if text.endswith("s") and not text.endswith("ms")
        else value
    )


def body_file(folder: str) -> str:
    message = payload()
    path = os.path.join(folder, "validate.grpc")
    with open(path, "wb") as handle:
        handle.write(b"\x00" + struct.pack(">I", len(message)) + message)  # the gRPC frame: flag, length, message
    return path


def compare_with_echo(body: str, rounds: int, requests: int) -> dict[str, object]:
    server, target = start_server()
    sides: dict[str, list[dict[str, float]]] = {"validate": [], "echo": []}
    try:
        for path in ("/argwatch.v1.Gateway/Validate", "/argwatch.bench.Echo/Echo"):
            h2load(target, path, body, requests // 4)  # warm-up
        for _ in range(rounds):
            for name, path in (("validate", "/argwatch.v1.Gateway/Validate"), ("echo", "/argwatch.bench.Echo/Echo")):
                before = server_cpu_seconds(server.pid)
                result = h2load(target, path, body, requests)
                result["server_cpu_us_per_call"] = 1e6 * (server_cpu_seconds(server.pid) - before) / requests
                sides[name].append(result)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    pairs = [
        v["requests_per_second"] / e["requests_per_second"]
        for v, e in zip(sides["validate"], sides["echo"], strict=True)
    ]
    cpu = [
        v["server_cpu_us_per_call"] / e["server_cpu_us_per_call"]
        for v, e in zip(sides["validate"], sides["echo"], strict=True)
    ]

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in sides[name])

    print(f"h2load, {CONNECTIONS} connections x {STREAMS} streams, {rounds} rounds of {requests} requests per side")
    print(f"{'side':<10} {'req/s':>8} {'mean ms':>8} {'server CPU us/call':>19}")
    for name in sides:
        print(f"{name:<10} {median(name, 'requests_per_second'):>8.0f} {median(name, 'mean_ms'):>8.2f} "
              f"{median(name, 'server_cpu_us_per_call'):>19.0f}")  # fmt: skip
    print(f"Validate / echo throughput: {statistics.median(pairs):.3f} (goal >= 0.90); "
          f"CPU per call: {statistics.median(cpu):.2f}x (goal <= 1.15)")  # fmt: skip
    return {"sides": sides, "throughput_ratio": statistics.median(pairs), "cpu_ratio": statistics.median(cpu)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def workers_scaling(body: str, requests: int, folder: str) -> dict[str, float]:
    redis = start_redis(folder)
    results: dict[str, float] = {}
    try:
        for workers in (1, 2):
            port, admin, metrics = free_port(), free_port(), free_port()
            server = subprocess.Popen(
                [ARGWATCH, "serve", "--policy", os.path.join(HERE, "policy.yaml"), "--redis", redis.url,
                 "--workers", str(workers), "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
                 "--metrics-listen", f"127.0.0.1:{metrics}", "--log-level", "WARNING", "--sample-log", os.devnull],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                _wait_serving(f"127.0.0.1:{port}")
                h2load(f"127.0.0.1:{port}", "/argwatch.v1.Gateway/Validate", body, requests // 4)  # warm-up
                rates = [
                    h2load(f"127.0.0.1:{port}", "/argwatch.v1.Gateway/Validate", body, requests)["requests_per_second"]
                    for _ in range(3)
                ]
                results[str(workers)] = statistics.median(rates)
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
    finally:
        redis.kill()
    print(f"--workers 1: {results['1']:.0f} req/s; --workers 2: {results['2']:.0f} req/s "
          f"({results['2'] / results['1']:.2f}x on {os.cpu_count()} cores, h2load sharing them)")  # fmt: skip
    return results


def _wait_serving(target: str) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with grpc.insecure_channel(target) as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    time.sleep(1.0)  # the other workers start alongside
                    return
        except grpc.RpcError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"argwatch serve did not start on {target}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        body = body_file(folder)
        echo = compare_with_echo(body, args.rounds, args.requests)
        scaling = workers_scaling(body, args.requests, folder)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, time.strftime("h2load-%Y%m%dT%H%M%S.json"))
    with open(path, "w") as handle:
        json.dump({"python": platform.python_version(), "echo": echo, "workers": scaling}, handle, indent=2)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
