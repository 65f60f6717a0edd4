"""Where the gateway's server CPU goes under load: py-spy samples the bench server while 64 calls are in flight.

The load is unary Validate over 4 loopback connections for `--seconds`; py-spy
samples the server process (native grpc frames included) at 200 Hz. Printed:
the share of the server's busy samples (idle epoll waits left out) spent in
each of the gateway's own functions, inclusive: what our code costs next to
gRPC's machinery around it.

    .venv/bin/python bench/profile_server.py [--seconds 12]
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

from validate import VALIDATE_METHOD, payload, start_server

IDLE = "select (selectors.py"


async def load(target: str, seconds: float, in_flight: int) -> int:
    body = payload()
    channels = [grpc.aio.insecure_channel(target) for _ in range(4)]
    calls = [channel.unary_unary(VALIDATE_METHOD) for channel in channels]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(spy):
        raise SystemExit("py-spy is missing: .venv/bin/pip install py-spy")
    server, target = start_server()
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "samples.txt")
        try:
            sampler = subprocess.Popen(
                [spy, "record", "-p", str(server.pid), "-d", str(int(args.seconds)), "-r", "200",
                 "-f", "raw", "-o", out, "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(0.5)
            calls = asyncio.run(load(target, args.seconds, args.in_flight))
            sampler.wait(timeout=60)
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
        with open(out) as handle:
            busy, inclusive = shares(handle.read())
    print(f"{calls} Validate calls in {args.seconds:.0f} s at {args.in_flight} in flight; {busy} busy samples")
    print(f"{'share of server busy time':>26}  function (inclusive)")
    for frame, count in inclusive.most_common(15):
        print(f"{100 * count / busy:>25.1f}%  {frame}")
    print("the rest is gRPC's and asyncio's own work: (de)serialising, framing, scheduling")
    return 0


if __name__ == "__main__":
    sys.exit(main())
