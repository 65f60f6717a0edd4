"""The server's instructions per message for Validate, ValidateStream and their echoes: a count speed does not move.

validate.py and stream.py measure throughput, which on this shared 2-core
VM swings with the machine's speed and with the load generator sharing the
cores. This counts instead: the bench server (`bench_server.py`, the real
gateway and the bare echoes on one grpc.aio server) runs under valgrind's
cachegrind (instructions only, no cache simulation) while a client outside
valgrind sends a fixed number of messages of one kind. Each side runs twice,
with `--messages` and with three times as many; the difference, per message,
is the server's cost of one message without its start-up (all its threads:
gRPC's C core, the event loop, the handler; not the kernel's).

Sides: `echo` (bytes back, no parsing), `typed` (the request parsed, a fixed
answer), `validate`, `echo_stream`, `validate_stream`. Unary calls keep 16
in flight over 4 connections; streams are 4, each with 16 outstanding.
About 10 minutes; needs valgrind (Debian's `valgrind`), which `make test`
does not install.

    python bench/server_instructions.py [--messages 600] [--sides validate echo]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from figures import report
from validate import HERE, VALIDATE_METHOD, payload

METHODS = {
    "echo": "/argwatch.bench.Echo/Echo",
    "typed": "/argwatch.bench.Echo/Typed",
    "validate": VALIDATE_METHOD,
    "echo_stream": "/argwatch.bench.Echo/EchoStream",
    "validate_stream": "/argwatch.v1.Gateway/ValidateStream",
}
NAMES = {
    "echo": "bare echo",
    "typed": "typed no-op",
    "validate": "Validate",
    "echo_stream": "bare echo stream",
    "validate_stream": "ValidateStream",
}
# (candidate, baseline, the throughput goal for the pair)
COMPARED = (("validate", "echo", 0.90), ("typed", "echo", 0.90), ("validate_stream", "echo_stream", 0.95))
IN_FLIGHT = 16
STREAMS = 4
CONNECTIONS = 4


async def send(target: str, side: str, messages: int, in_flight: int) -> None:
    """`messages` messages of `side`, answered, then every channel closed."""
    body = payload()
    channels = [grpc.aio.insecure_channel(target) for _ in range(CONNECTIONS)]
    if side.endswith("_stream"):
        streams = min(STREAMS, in_flight)
        calls = [channels[i % CONNECTIONS].stream_stream(METHODS[side]) for i in range(streams)]
        window = max(1, in_flight // streams)
        await asyncio.gather(*(_one_stream(call, body, messages // streams, window) for call in calls))
    else:
        unary = [channel.unary_unary(METHODS[side]) for channel in channels]
        left = messages

        async def worker(index: int) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await unary[index % CONNECTIONS](body, timeout=600)

        await asyncio.gather(*(worker(i) for i in range(in_flight)))
    for channel in channels:
        await channel.close()


async def _one_stream(call: grpc.aio.StreamStreamMultiCallable, body: bytes, count: int, window: int) -> None:
    credit = asyncio.Semaphore(window)
    stream = call(timeout=600)

    async def write() -> None:
        for _ in range(count):
            await credit.acquire()
            await stream.write(body)
        await stream.done_writing()

    writer = asyncio.create_task(write())
    answered = 0
    async for _ in stream:
        answered += 1
        credit.release()
    await writer
    if answered != count:
        raise RuntimeError(f"a stream answered {answered} of {count}")


def counted(side: str, messages: int, in_flight: int, profile: str = "/dev/null") -> int:
    """Instructions cachegrind counted in a bench server that answered `messages` messages of `side`; its
    per-function counts written to `profile` (for cg_annotate --diff)."""
    server = subprocess.Popen(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            f"--cachegrind-out-file={profile}",
            sys.executable,
            os.path.join(HERE, "bench_server.py"),
            "--policy",
            os.path.join(HERE, "policy.yaml"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # One hash seed for every run: with Python's random one, sets and dicts collide differently per process.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert server.stdout is not None and server.stdin is not None
    port = server.stdout.readline().strip()
    if not port.isdigit():
        server.kill()
        raise RuntimeError(f"the bench server did not start under valgrind: {server.communicate()[1][-2000:]}")
    asyncio.run(send(f"127.0.0.1:{port}", side, messages, in_flight))
    _, errors = server.communicate(timeout=600)  # closing its stdin stops it
    found = re.search(r"I\s+refs:\s+([\d,]+)", errors)
    if found is None:
        raise RuntimeError(f"cachegrind printed no count:\n{errors[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=600, help="the smaller run's messages (the larger: 3x)")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="calls (or stream messages) outstanding")
    parser.add_argument("--sides", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument(
        "--profiles",
        metavar="DIR",
        help="keep cachegrind's per-function counts there, SIDE-MESSAGES.out each: "
        "`cg_annotate --diff DIR/echo_stream-1800.out DIR/validate_stream-1800.out` shows where a side's "
        "instructions go beyond another's",
    )
    arguments = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured")
        return 0
    small, large = arguments.messages, 3 * arguments.messages
    per_message: dict[str, float] = {}
    for side in arguments.sides:
        started = time.monotonic()
        profiles = [
            os.path.join(arguments.profiles, f"{side}-{count}.out") if arguments.profiles else "/dev/null"
            for count in (small, large)
        ]
        if arguments.profiles:
            os.makedirs(arguments.profiles, exist_ok=True)
        few = counted(side, small, arguments.in_flight, profiles[0])
        many = counted(side, large, arguments.in_flight, profiles[1])
        per_message[side] = (many - few) / (large - small)
        print(f"{side:16} {per_message[side]:>12,.0f} instructions a message ({time.monotonic() - started:.0f} s)")
    ratios = {}
    for candidate, baseline, goal in COMPARED:
        if candidate in per_message and baseline in per_message:
            ratio = ratios[f"{candidate}/{baseline}"] = per_message[candidate] / per_message[baseline]
            print(
                f"{candidate} / {baseline}: {ratio:.3f}x the instructions (the throughput goal {goal} needs "
                f"at most {1 / goal:.3f}x, were time in proportion)"
            )
            report(
                f"{NAMES[candidate]} / {NAMES[baseline]}: the server's instructions a message",
                ratio,
                "x",
                baseline=f"{per_message[candidate]:,.0f} against {per_message[baseline]:,.0f}; the throughput goal "
                f"{goal} would need at most {1 / goal:.3f}x",
            )
    os.makedirs(arguments.out, exist_ok=True)
    path = os.path.join(arguments.out, f"server-instructions-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump({"messages": [small, large], "per_message": per_message, "ratios": ratios}, handle, indent=2)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
