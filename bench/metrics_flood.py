"""Validate's latency while 2,000 connections flood the metrics port, against the same gateway without the flood.

The attack it measures (docs/security.md): `prometheus_client`'s server held a
thread per scrape connection, and 2,000 of them stalled Validate for 11-20 s.
One gateway process (bench_server.py) serves both phases; this process sends
Validate one call at a time and times each, while a second process (the
flood) holds 2,000 connections to /metrics in the flood phases: half send
nothing, half send a request and never read the answer, and each reconnects
when the gateway closes it. Phases alternate (quiet, flood, quiet, flood ...)
so that the machine's drift lands on both; the server's thread count is read
from /proc in every phase.

    python bench/metrics_flood.py                   # 3 pairs of 10 s phases
    python bench/metrics_flood.py --seconds 5 --pairs 1

Traffic goes to 127.0.0.1 only, and every phase is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import socket
import statistics
import sys
import time

import grpc
from validate import VALIDATE_METHOD, payload, start_bench_server

HERE = os.path.dirname(os.path.abspath(__file__))
CONNECTIONS = 2000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(next(line for line in handle if line.startswith("Threads:")).split()[1])


async def flood(port: int, connections: int, seconds: float) -> None:
    """Holds `connections` connections to the metrics port for `seconds` (the flood process's whole job)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, connections + 256)), hard))
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    ready = 0

    async def hold(index: int) -> None:
        nonlocal ready
        counted = False
        while loop.time() < until:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            if not counted:
                counted, ready = True, ready + 1
                if ready == connections:
                    print("ready", flush=True)
            if index % 2:
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")  # and never read the answer
            with contextlib.suppress(TimeoutError, OSError):  # until the gateway closes it, or the phase ends
                await asyncio.wait_for(reader.read(1), max(0.0, until - loop.time()))
            writer.close()

    await asyncio.gather(*(hold(index) for index in range(connections)))


async def phase(call: grpc.aio.UnaryUnaryMultiCallable, body: bytes, seconds: float, pid: int) -> dict[str, float]:
    """Validate one at a time for `seconds`: latencies, and the most threads the server had meanwhile."""
    latencies: list[float] = []
    threads = threads_of(pid)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.perf_counter()
        await call(body, timeout=30)
        latencies.append(time.perf_counter() - started)
        if len(latencies) % 50 == 0:
            threads = max(threads, threads_of(pid))
    ordered = sorted(latencies)
    return {
        "calls": len(ordered),
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)],
        "max_ms": 1000 * ordered[-1],
        "threads": threads,
    }


async def run(seconds: float, pairs: int, connections: int) -> None:
    metrics_port = free_port()
    server, target = start_bench_server(
        "--policy", os.path.join(HERE, "policy.yaml"), "--metrics-listen", f"127.0.0.1:{metrics_port}"
    )
    results: dict[str, list[dict[str, float]]] = {"quiet": [], "flood": []}
    try:
        async with grpc.aio.insecure_channel(target) as channel:
            call = channel.unary_unary(VALIDATE_METHOD)
            body = payload()
            for _ in range(200):  # warm up
                await call(body, timeout=10)
            for _ in range(pairs):
                results["quiet"].append(await phase(call, body, seconds, server.pid))
                flooder = await asyncio.create_subprocess_exec(
                    sys.executable, __file__, "--flood-port", str(metrics_port), "--connections", str(connections),
                    "--seconds", str(seconds + 30), stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert flooder.stdout is not None
                line = await flooder.stdout.readline()
                if line.strip() != b"ready":
                    raise SystemExit("the flood did not open its connections")
                results["flood"].append(await phase(call, body, seconds, server.pid))
                flooder.kill()
                await flooder.wait()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    print(f"Validate, 1 in flight, {connections} connections on /metrics in the flood phases ({pairs} pairs of "
          f"{seconds:g} s):")  # fmt: skip
    print(f"{'phase':<8}{'calls':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}{'threads':>9}")
    for name, phases in results.items():
        for found in phases:
            print(
                f"{name:<8}{found['calls']:>8.0f}{found['p50_ms']:>10.2f}{found['p99_ms']:>10.2f}"
                f"{found['max_ms']:>10.1f}{found['threads']:>9.0f}"
            )
    quiet = statistics.median(found["p99_ms"] for found in results["quiet"])
    flooded = statistics.median(found["p99_ms"] for found in results["flood"])
    print(f"median p99: quiet {quiet:.2f} ms, flood {flooded:.2f} ms (goal: under 50 ms), ratio {flooded / quiet:.2f}")
    print(f"server threads: quiet {max(f['threads'] for f in results['quiet']):.0f}, "
          f"flood {max(f['threads'] for f in results['flood']):.0f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    parser.add_argument("--flood-port", type=int, help=argparse.SUPPRESS)  # the flood process
    args = parser.parse_args()
    if args.flood_port:
        asyncio.run(flood(args.flood_port, args.connections, args.seconds))
    else:
        asyncio.run(run(args.seconds, args.pairs, args.connections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
