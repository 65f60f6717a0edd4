"""Validate against a bare echo RPC carrying the same payload, served by the same process, measured in the same run.

Method (docs/performance.md): one load generator alternates between the
two RPCs every 0.25 s (A, B, A, B, ...); each window is drained before the
next, so a window's calls, latencies and the server's CPU time belong to one
side. The ratio of each adjacent pair is taken, and the median of the pairs is
quoted, then the median of the runs. The server's CPU microseconds per call
come from the server process's own CPU time (/proc/PID/stat), the steadiest
figure on a shared machine.

    python bench/validate.py                      # 1, 16, 64 in flight; 3 runs of 20 s each
    python bench/validate.py --seconds 5 --runs 1 # a quick look

Traffic goes to 127.0.0.1 only, and every run is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import grpc
import orjson
from figures import report

from argwatch.v1 import gateway_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE_METHOD = "/argwatch.v1.Gateway/Validate"
BASELINES = {"echo": "/argwatch.bench.Echo/Echo", "typed": "/argwatch.bench.Echo/Typed"}
WINDOW_SECONDS = 0.25
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def payload() -> bytes:
    """A realistic refund_order call (about 300 bytes), with a legal reason code."""
    arguments = {
        "order_id": "ord_0012345678",
        "reason_code": "DAMAGED_ITEM",
        "amount_cents": 12_000,
        "note": "Customer reports the box arrived crushed; photos attached to the ticket.",
    }
    return gateway_pb2.ValidateRequest(
        tool="refund_order",
        arguments_json=orjson.dumps(arguments),
        conversation_id="conv-5f1c0d6e9a7b4c3d",
        call_id="call-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        session=gateway_pb2.Session(customer_id="cus_000123", tenant="acme"),
    ).SerializeToString()


def server_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


@dataclass
class Side:
    """What one RPC got over all its windows in one run."""

    calls: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    window_rates: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.latencies)
        return {
            "calls_per_second": self.calls / self.seconds if self.seconds else 0.0,
            "p50_ms": 1000 * ordered[len(ordered) // 2] if ordered else 0.0,
            "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)] if ordered else 0.0,
            "server_cpu_us_per_call": 1e6 * self.cpu_seconds / self.calls if self.calls else 0.0,
        }


async def window(call: grpc.aio.UnaryUnaryMultiCallable, body: bytes, in_flight: int, side: Side) -> None:
    """Keeps `in_flight` calls going for one window, then drains them."""
    loop = asyncio.get_running_loop()
    until = loop.time() + WINDOW_SECONDS
    latencies: list[float] = []

    async def worker() -> None:
        while loop.time() < until:
            started = time.perf_counter()
            await call(body, 10)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - started
    side.calls += len(latencies)
    side.seconds += elapsed
    side.latencies.extend(latencies)
    side.window_rates.append(len(latencies) / elapsed)


async def one_run(target: str, pid: int, in_flight: int, seconds: float, baseline: str) -> dict[str, object]:
    body = payload()
    # Several connections, as real clients spread over a pool; the same ones serve both sides.
    channels = [grpc.aio.insecure_channel(target) for _ in range(min(4, in_flight))]
    validate_calls = [c.unary_unary(VALIDATE_METHOD) for c in channels]
    echo_calls = [c.unary_unary(BASELINES[baseline]) for c in channels]

    def pick(calls: list[grpc.aio.UnaryUnaryMultiCallable]):  # type: ignore[no-untyped-def]
        index = 0

        async def call(request: bytes, deadline: float) -> bytes:
            nonlocal index
            index += 1
            return await calls[index % len(calls)](request, timeout=deadline)  # type: ignore[no-any-return]

        return call

    validate, echo = pick(validate_calls), pick(echo_calls)
    sides = {"validate": Side(), "echo": Side()}
    # Warm up both paths (connections, caches, the interpreter's specialisations).
    for _ in range(4):
        await window(validate, body, in_flight, Side())
        await window(echo, body, in_flight, Side())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, call in (("validate", validate), ("echo", echo)):
            before = server_cpu_seconds(pid)
            await window(call, body, in_flight, sides[name])
            sides[name].cpu_seconds += server_cpu_seconds(pid) - before
    for channel in channels:
        await channel.close()
    pairs = [v / e for v, e in zip(sides["validate"].window_rates, sides["echo"].window_rates, strict=False)]
    validate_summary, echo_summary = sides["validate"].summary(), sides["echo"].summary()
    return {
        "in_flight": in_flight,
        "validate": validate_summary,
        "echo": echo_summary,
        "throughput_ratio_median_of_pairs": statistics.median(pairs),
        "throughput_ratio_p10_p90": [_quantile(pairs, 0.1), _quantile(pairs, 0.9)],
        "cpu_per_call_ratio": validate_summary["server_cpu_us_per_call"] / echo_summary["server_cpu_us_per_call"],
        "pairs": len(pairs),
    }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_server(gate: bool = False) -> tuple[subprocess.Popen[str], str]:
    return start_bench_server("--policy", os.path.join(HERE, "policy.yaml"), *(["--gate"] if gate else []))


def start_bench_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    """bench_server.py with `args`, once it serves: the process (it stops when its stdin closes) and its target."""
    process = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "bench_server.py"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        raise SystemExit(f"bench server {args} did not start")
    return process, f"127.0.0.1:{port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument(
        "--gate",
        action="store_true",
        help="Validate through the full gate: schema, a cached record look-up, two CEL rules",
    )
    parser.add_argument(
        "--baseline",
        choices=sorted(BASELINES),
        default="echo",
        help="echo: raw bytes back; typed: parse the request, fixed response (gRPC's cost for the messages)",
    )
    args = parser.parse_args()

    server, target = start_server(args.gate)
    results = []
    try:
        for in_flight in args.in_flight:
            runs = [
                asyncio.run(one_run(target, server.pid, in_flight, args.seconds, args.baseline))
                for _ in range(args.runs)
            ]
            results.append({"in_flight": in_flight, "runs": runs})
            print_level(in_flight, runs)
            if in_flight == 64 and not args.gate and args.baseline == "echo":  # issue 31's figure
                report_ratio(runs)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"validate-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump(
            {
                "benchmark": f"validate{'_gate' if args.gate else ''}_vs_{args.baseline}",
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "grpc": grpc.__version__},
                "seconds_per_run": args.seconds,
                "results": results,
            },
            handle,
            indent=2,
        )
    print(f"\nwritten: {os.path.relpath(path)}")
    return 0


def print_level(in_flight: int, runs: list[dict[str, object]]) -> None:
    def median(path: tuple[str, ...]) -> float:
        values = []
        for run in runs:
            value: object = run
            for key in path:
                value = value[key]  # type: ignore[index]
            values.append(float(value))  # type: ignore[arg-type]
        return statistics.median(values)

    if in_flight == runs[0]["in_flight"] and not getattr(print_level, "header", False):
        print(
            f"{'in flight':>9} | {'validate/s':>10} {'echo/s':>8} {'ratio':>6} | {'p50 ms v/e':>11} "
            f"{'p99 ms v/e':>11} | {'cpu us/call v/e':>15} {'ratio':>6}"
        )
        print_level.header = True  # type: ignore[attr-defined]
    print(
        f"{in_flight:>9} | {median(('validate', 'calls_per_second')):>10.0f} "
        f"{median(('echo', 'calls_per_second')):>8.0f} "
        f"{median(('throughput_ratio_median_of_pairs',)):>6.3f} | "
        f"{median(('validate', 'p50_ms')):>5.2f}/{median(('echo', 'p50_ms')):<5.2f} "
        f"{median(('validate', 'p99_ms')):>5.1f}/{median(('echo', 'p99_ms')):<5.1f} | "
        f"{median(('validate', 'server_cpu_us_per_call')):>7.0f}/{median(('echo', 'server_cpu_us_per_call')):<7.0f} "
        f"{median(('cpu_per_call_ratio',)):>6.3f}"
    )
    spread = [run["throughput_ratio_median_of_pairs"] for run in runs]
    print(f"{'':>9}   runs' ratios: {', '.join(f'{r:.3f}' for r in spread)}")  # type: ignore[str-format]


def report_ratio(runs: list[dict[str, object]]) -> None:
    """The ratio print_level prints at 64 in flight (the median of the runs' medians of pairs), for the table."""
    ratios = [float(run["throughput_ratio_median_of_pairs"]) for run in runs]  # type: ignore[arg-type]
    ratio = statistics.median(ratios)
    validate = statistics.median(float(run["validate"]["calls_per_second"]) for run in runs)  # type: ignore[index]
    echo = statistics.median(float(run["echo"]["calls_per_second"]) for run in runs)  # type: ignore[index]
    report(
        "Validate / bare echo throughput, 64 in flight",
        ratio,
        "",
        ">= 0.90",
        ratio >= 0.90,
        f"{validate:.0f} against {echo:.0f} calls/s, alternating windows in the same run; "
        f"runs {', '.join(f'{r:.3f}' for r in ratios)}",
    )


if __name__ == "__main__":
    sys.exit(main())
