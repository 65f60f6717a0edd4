"""Validate against a bare echo driven by h2load (a native HTTP/2 load generator), and `--workers` scaling.

h2load (Debian's nghttp2-client; `make bench` installs it) sends a pre-framed
gRPC body: the same ~260-byte ValidateRequest the Python benchmarks use. A
native client leaves the server more of the two cores than a Python one does.

1. One bench server (bench_server.py) serves Validate and the raw-bytes Echo.
   At 1, 16 and 64 calls in flight (1x1, 4x4 and 4x16 connections x streams),
   rounds alternate Validate and Echo (`--rounds` each, `--requests` per round,
   a fifth of it at 1 in flight). Per side: requests/s, p50 and p99 of the
   per-request times (h2load's --log-file), and server CPU per call (the
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


def h2load(
    target: str, path: str, body_file: str, requests: int, connections: int = CONNECTIONS, streams: int = STREAMS
) -> dict[str, float]:
    """One h2load run: requests/s, and p50/p99/max of its per-request times (from its --log-file)."""
    binary = shutil.which("h2load")
    if binary is None:
        raise SystemExit("h2load is missing: apt-get install nghttp2-client (make bench installs it)")
    with tempfile.TemporaryDirectory() as folder:
        log = os.path.join(folder, "requests.tsv")
        out = subprocess.run(
            [binary, "-n", str(requests), "-c", str(connections), "-m", str(streams), "--log-file", log,
             "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", body_file, f"http://{target}{path}"],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout  # fmt: skip
        with open(log) as handle:  # start (us since epoch), status, us until the end of the response
            latencies = sorted(int(line.split("\t")[2]) / 1000 for line in handle if line.strip())
    done = re.search(r"(\d+) succeeded, (\d+) failed", out)
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    if not (done and rate and latencies) or int(done.group(2)):
        raise SystemExit(f"h2load failed:\n{out}")
    return {
        "requests_per_second": float(rate.group(1)),
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "max_ms": latencies[-1],
    }


def body_file(folder: str) -> str:
    message = payload()
    path = os.path.join(folder, "validate.grpc")
    with open(path, "wb") as handle:
        handle.write(b"\x00" + struct.pack(">I", len(message)) + message)  # the gRPC frame: flag, length, message
    return path


# In flight: (connections, streams per connection), as the Python benchmark's 1, 16 and 64.
LEVELS = {1: (1, 1), 16: (4, 4), 64: (CONNECTIONS, STREAMS)}


def compare_with_echo(body: str, rounds: int, requests: int) -> dict[str, object]:
    """Per level of calls in flight: rounds alternating Validate and the raw echo on one server."""
    server, target = start_server()
    results: dict[str, object] = {}
    paths = {"validate": "/argwatch.v1.Gateway/Validate", "echo": "/argwatch.bench.Echo/Echo"}
    print(f"h2load, {rounds} rounds per side and level; medians over the rounds")
    print(f"{'in flight':>9} {'side':<9} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU us/call':>12}  ratio (goal)")
    try:
        for path in paths.values():
            h2load(target, path, body, requests // 4)  # warm-up
        for in_flight, (connections, streams) in LEVELS.items():
            count = requests if in_flight > 1 else max(requests // 5, 1000)  # one in flight is ~5x slower
            sides: dict[str, list[dict[str, float]]] = {"validate": [], "echo": []}
            for _ in range(rounds):
                for name, path in paths.items():
                    before = server_cpu_seconds(server.pid)
                    result = h2load(target, path, body, count, connections, streams)
                    result["server_cpu_us_per_call"] = 1e6 * (server_cpu_seconds(server.pid) - before) / count
                    sides[name].append(result)
            pairs = [v["requests_per_second"] / e["requests_per_second"] for v, e in zip(*sides.values(), strict=True)]
            cpu = [
                v["server_cpu_us_per_call"] / e["server_cpu_us_per_call"] for v, e in zip(*sides.values(), strict=True)
            ]
            for name, runs in sides.items():
                row = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
                throughput, cpu_ratio = statistics.median(pairs), statistics.median(cpu)
                ratio = (
                    f"  throughput {throughput:.3f} (>= 0.90), CPU {cpu_ratio:.2f}x (<= 1.15)"
                    if name == "validate"
                    else ""
                )
                print(f"{in_flight:>9} {name:<9} {row['requests_per_second']:>7.0f} {row['p50_ms']:>7.2f} "
                      f"{row['p99_ms']:>7.2f} {row['server_cpu_us_per_call']:>12.0f}{ratio}")  # fmt: skip
            results[str(in_flight)] = {
                "sides": sides,
                "throughput_ratio": statistics.median(pairs),
                "cpu_ratio": statistics.median(cpu),
            }
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    return results


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
