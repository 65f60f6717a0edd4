"""Where the gateway's server CPU goes under load: py-spy samples the bench server while 64 calls are in flight.

The load is unary Validate over 4 loopback connections for `--seconds`; py-spy
samples the server process at 200 Hz. Printed: the share of the server's busy
samples (idle epoll waits left out) spent in each of the gateway's own
functions, inclusive: what our code costs next to gRPC's machinery around it.

Then the same load alternates (`--rounds` each, same server) between Validate
and the typed baseline (Echo/Typed: the request parsed, a fixed response), and
the busy samples per call of each, and of our functions, are printed as
microseconds per call: what our Python costs under load, against its cost in
a tight loop.

    .venv/bin/python bench/profile_server.py [--seconds 12] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from validate import BASELINES, VALIDATE_METHOD, payload, start_server

IDLE = "select (selectors.py"


RATE = 200  # samples a second: one sample stands for 5 ms of a thread's time


async def load(target: str, seconds: float, in_flight: int, method: str = VALIDATE_METHOD) -> int:
    body = payload()
    channels = [grpc.aio.insecure_channel(target) for _ in range(4)]
    calls = [channel.unary_unary(method) for channel in channels]
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    done = 0

    async def worker(index: int) -> None:
        nonlocal done
        while loop.time() < end:
            await calls[index % len(calls)](body, timeout=10)
            done += 1

    await asyncio.gather(*(worker(i) for i in range(in_flight)))
    for channel in channels:
        await channel.close()
    return done


def shares(raw: str) -> tuple[int, Counter[str]]:
    """Busy samples, and per function of ours the samples it was on the stack for."""
    busy, inclusive = 0, Counter[str]()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames, count = stack.split(";"), int(count_text)
        if IDLE in frames[-1]:
            continue
        busy += count
        ours = {f.split(":")[0] + ")" for f in frames if "(server/" in f}
        for frame in ours:
            inclusive[frame] += count
    return busy, inclusive


def sampled(spy: str, pid: int, target: str, seconds: float, in_flight: int, method: str) -> tuple[int, str]:
    """Calls made, and py-spy's raw samples of the server meanwhile."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "samples.txt")
        sampler = subprocess.Popen(
            [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", str(RATE),
             "-f", "raw", "-o", out, "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(0.5)
        calls = asyncio.run(load(target, seconds, in_flight, method))
        sampler.wait(timeout=60)
        with open(out) as handle:
            return calls, handle.read()


def handler_in_process(repeats: int = 5, calls: int = 4000) -> float:
    """Microseconds per call of the same handler on the same payload, in a tight loop (best of `repeats`)."""
    from bench_server import bench_settings
    from timing import best_micros

    from argwatch.server.process.app import build_gateway

    class Context:
        def time_remaining(self) -> float:
            return 10.0

    async def run() -> float:
        gateway = await build_gateway(bench_settings(os.path.join(os.path.dirname(__file__), "policy.yaml")))
        try:
            servicer, body, context = gateway.gateway_servicer, payload(), Context()
            return await best_micros(lambda: servicer.Validate(body, context), calls, repeats)  # type: ignore[arg-type]
        finally:
            await gateway.stop(0)

    return asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="alternating Validate / typed rounds of 8 s each")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(spy):
        raise SystemExit("py-spy is missing: .venv/bin/pip install py-spy")
    server, target = start_server()
    per_side: dict[str, list[float]] = {"validate": [0, 0, 0], "typed": [0, 0, 0]}  # calls, busy, ours
    try:
        calls, raw = sampled(spy, server.pid, target, args.seconds, args.in_flight, VALIDATE_METHOD)
        busy, inclusive = shares(raw)
        for _ in range(args.rounds):
            for side, method in (("validate", VALIDATE_METHOD), ("typed", BASELINES["typed"])):
                made, samples = sampled(spy, server.pid, target, 8.0, args.in_flight, method)
                side_busy, side_ours = shares(samples)
                handler = side_ours.get("GatewayServicer.Validate (server/edge/gateway_service.py)", 0)
                for index, value in enumerate((made, side_busy, handler)):
                    per_side[side][index] += value
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    print(f"{calls} Validate calls in {args.seconds:.0f} s at {args.in_flight} in flight; {busy} busy samples")
    print(f"{'share of server busy time':>26}  function (inclusive)")
    for frame, count in inclusive.most_common(15):
        print(f"{100 * count / busy:>25.1f}%  {frame}")
    print("the rest is gRPC's and asyncio's own work: (de)serialising, framing, scheduling")
    calls_v, busy_v, handler_v = per_side["validate"]
    calls_t, busy_t, _ = per_side["typed"]
    if calls_v and calls_t:
        # A sample stands for 1/RATE s of one thread: busy samples per call as microseconds per call.
        validate_us, handler_us, typed_us = (1e6 * n / RATE / c for n, c in
                                             ((busy_v, calls_v), (handler_v, calls_v), (busy_t, calls_t)))  # fmt: skip
        print(f"\nalternating rounds ({args.rounds} x 8 s each), busy samples as microseconds of a thread per call:")
        print(f"  Validate: {validate_us:.0f} us per call, of which the handler {handler_us:.0f}")
        print(f"  typed baseline (parse, fixed response): {typed_us:.0f} us per call")
        print(f"  Validate costs {validate_us - typed_us:+.0f} us per call over the typed baseline")
        tight = handler_in_process()
        print(
            f"  the same handler in a tight loop, in this process: {tight:.1f} us per call; under load it costs "
            f"{handler_us / tight:.1f}x that"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
