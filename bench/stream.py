"""ValidateStream against a bare bidirectional echo stream, and against unary Validate, measured in the same run.

Method (as validate.py; docs/performance.md): one server process serves
Gateway/ValidateStream, Echo/EchoStream (the request bytes back, no
(de)serialisation) and Gateway/Validate. The load generator rotates between
the three every 0.25 s window, each drained before the next:

- stream sides: `--streams` bidirectional streams, each keeping `--window`
  messages sent and not yet answered;
- unary side: `--in-flight` Validate calls at a time over 4 connections.

Each side's messages per second and the server's CPU microseconds per message
(the server process's own CPU time) are summed over its windows; ratios are
taken per adjacent window, and their median is printed.

    .venv/bin/python bench/stream.py               # 3 runs of 15 s
    .venv/bin/python bench/stream.py --seconds 5 --runs 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from figures import report
from validate import HERE, VALIDATE_METHOD, WINDOW_SECONDS, payload, server_cpu_seconds, start_server

STREAM_METHOD = "/argwatch.v1.Gateway/ValidateStream"
ECHO_STREAM_METHOD = "/argwatch.bench.Echo/EchoStream"


class Counter:
    def __init__(self) -> None:
        self.messages = 0
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.rates: list[float] = []

    def summary(self) -> dict[str, float]:
        return {
            "messages_per_second": self.messages / self.seconds if self.seconds else 0.0,
            "server_cpu_us_per_message": 1e6 * self.cpu_seconds / self.messages if self.messages else 0.0,
        }


async def stream_window(calls: list[grpc.aio.StreamStreamMultiCallable], body: bytes, window: int) -> int:
    """Every stream keeps `window` messages outstanding for WINDOW_SECONDS, then half-closes and drains."""
    loop = asyncio.get_running_loop()
    until = loop.time() + WINDOW_SECONDS

    async def one(call: grpc.aio.StreamStreamMultiCallable) -> int:
        credit = asyncio.Semaphore(window)
        stream = call()
        answered = 0

        async def write() -> None:
            while loop.time() < until:
                await credit.acquire()
                await stream.write(body)
            await stream.done_writing()

        writer = asyncio.create_task(write())
        async for _ in stream:
            answered += 1
            credit.release()
        await writer
        return answered

    return sum(await asyncio.gather(*(one(call) for call in calls)))


async def unary_window(calls: list[grpc.aio.UnaryUnaryMultiCallable], body: bytes, in_flight: int) -> int:
    loop = asyncio.get_running_loop()
    until = loop.time() + WINDOW_SECONDS
    done = 0

    async def worker(index: int) -> None:
        nonlocal done
        while loop.time() < until:
            await calls[index % len(calls)](body, timeout=10)
            done += 1

    await asyncio.gather(*(worker(i) for i in range(in_flight)))
    return done


async def one_run(
    target: str, pid: int, seconds: float, streams: int, window: int, in_flight: int
) -> dict[str, object]:
    body = payload()
    channels = [grpc.aio.insecure_channel(target) for _ in range(4)]
    validate_streams = [channels[i % 4].stream_stream(STREAM_METHOD) for i in range(streams)]
    echo_streams = [channels[i % 4].stream_stream(ECHO_STREAM_METHOD) for i in range(streams)]
    unary = [channel.unary_unary(VALIDATE_METHOD) for channel in channels]
    sides = {"validate_stream": Counter(), "echo_stream": Counter(), "validate_unary": Counter()}

    async def run(name: str) -> int:
        if name == "validate_stream":
            return await stream_window(validate_streams, body, window)
        if name == "echo_stream":
            return await stream_window(echo_streams, body, window)
        return await unary_window(unary, body, in_flight)

    for name in sides:  # warm up
        for _ in range(3):
            await run(name)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, counter in sides.items():
            cpu_before, started = server_cpu_seconds(pid), time.perf_counter()
            messages = await run(name)
            elapsed = time.perf_counter() - started
            counter.messages += messages
            counter.seconds += elapsed
            counter.cpu_seconds += server_cpu_seconds(pid) - cpu_before
            counter.rates.append(messages / elapsed)
    for channel in channels:
        await channel.close()
    rates = {name: counter.rates for name, counter in sides.items()}
    return {
        **{name: counter.summary() for name, counter in sides.items()},
        "stream_vs_echo_stream": statistics.median(
            v / e for v, e in zip(rates["validate_stream"], rates["echo_stream"], strict=False)
        ),
        "stream_vs_unary": statistics.median(
            s / u for s, u in zip(rates["validate_stream"], rates["validate_unary"], strict=False)
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--window", type=int, default=16, help="messages outstanding per stream")
    parser.add_argument("--in-flight", type=int, default=64, help="unary calls at a time")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    server, target = start_server()
    try:
        runs = [
            asyncio.run(one_run(target, server.pid, args.seconds, args.streams, args.window, args.in_flight))
            for _ in range(args.runs)
        ]
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)

    def median(side: str, key: str) -> float:
        return statistics.median(float(run[side][key]) for run in runs)  # type: ignore[index]

    print(f"{args.streams} streams x {args.window} outstanding; unary at {args.in_flight} in flight; {args.runs} runs")
    print(f"{'side':<16} {'msgs/s':>10} {'server CPU us/msg':>18}")
    for side in ("validate_stream", "echo_stream", "validate_unary"):
        rate, cpu = median(side, "messages_per_second"), median(side, "server_cpu_us_per_message")
        print(f"{side:<16} {rate:>10.0f} {cpu:>18.0f}")
    stream_vs_echo = statistics.median(float(run["stream_vs_echo_stream"]) for run in runs)  # type: ignore[arg-type]
    stream_vs_unary = statistics.median(float(run["stream_vs_unary"]) for run in runs)  # type: ignore[arg-type]
    print(f"ValidateStream / bare echo stream throughput: {stream_vs_echo:.3f}")
    print(f"ValidateStream / unary Validate throughput:   {stream_vs_unary:.2f}x (goal: >= 2x)")
    report(
        "ValidateStream / bare echo stream throughput",
        stream_vs_echo,
        "",
        ">= 0.95",
        stream_vs_echo >= 0.95,
        f"server CPU {median('validate_stream', 'server_cpu_us_per_message'):.0f} against "
        f"{median('echo_stream', 'server_cpu_us_per_message'):.0f} µs a message, alternating windows in the same run",
    )
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, time.strftime("stream-%Y%m%dT%H%M%S.json"))
    with open(path, "w") as handle:
        json.dump({"python": platform.python_version(), "args": vars(args), "runs": runs}, handle, indent=2)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
