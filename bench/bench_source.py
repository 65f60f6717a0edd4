"""The refresh benchmark's owning service: a real ValueSetSource in its own process, driven by stdin commands.

Prints its port, then reads lines:
    publish NAME COUNT        replace NAME with COUNT generated members (a snapshot to watchers)
    add NAME VALUE            add one member (a delta to watchers); acknowledged "ok T", T the
                              time.monotonic() at which the owner called ValueSetCatalog.add
    churn NAME RATE SECONDS PATH
                              RATE deltas a second for SECONDS, each adding a new member or removing the
                              oldest generated one in turn; then writes [version, monotonic seconds] of
                              each to PATH (JSON)
Each command is acknowledged with "ok" once published. EOF stops the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import grpc

from argwatch.sources import ValueSetCatalog, ValueSetSourceServicer
from argwatch.v1 import sources_pb2_grpc


def members(count: int) -> list[str]:
    return [f"component-{i:07d}" for i in range(count)]


async def churn(catalog: ValueSetCatalog, name: str, rate: float, seconds: float, path: str) -> None:
    """`rate` deltas a second on `name` for `seconds`, on a fixed schedule; each one's version and time."""
    published: list[tuple[int, float]] = []
    period, started = 1 / rate, time.monotonic()
    for step in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, started + step * period - time.monotonic()))
        if step % 2 == 0:
            version = catalog.add(name, [f"churn-{step:09d}"]).version
        else:
            version = catalog.remove(name, [f"component-{step // 2:07d}"]).version
        published.append((version, time.monotonic()))
    await asyncio.sleep(0.5)  # the last deltas go out before the file is written, not after
    await asyncio.to_thread(_write, path, published)


def _write(path: str, published: list[tuple[int, float]]) -> None:
    with open(path, "w") as handle:
        json.dump(published, handle)


async def main() -> None:
    catalog = ValueSetCatalog()
    catalog.publish("bench.codes", ["CODE-0"])
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 256 * 1024 * 1024)])
    sources_pb2_grpc.add_ValueSetSourceServicer_to_server(
        ValueSetSourceServicer(catalog, heartbeat_seconds=2.0), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command, name, argument, *more = line.split()
        if command == "publish":
            catalog.publish(name, members(int(argument)))
        elif command == "add":
            # CLOCK_MONOTONIC is one clock for the whole machine: the bench compares it with its own.
            called_at = time.monotonic()
            version = catalog.add(name, [argument]).version
            print(f"ok {called_at!r} {version}", flush=True)
            continue
        elif command == "churn":
            await churn(catalog, name, float(argument), float(more[0]), more[1])
        print("ok", flush=True)
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
