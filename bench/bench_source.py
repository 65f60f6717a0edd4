"""The refresh benchmark's owning service: a real ValueSetSource in its own process, driven by stdin commands.

Prints its port, then reads lines:
    publish NAME COUNT        replace NAME with COUNT generated members (a snapshot to watchers)
    add NAME VALUE            add one member (a delta to watchers)
Each command is acknowledged with "ok" once published. EOF stops the server.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from argwatch.sources import ValueSetCatalog, ValueSetSourceServicer
from argwatch.v1 import sources_pb2_grpc


def members(count: int) -> list[str]:
    return [f"component-{i:07d}" for i in range(count)]


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
        command, name, argument = line.split()
        current = catalog.get(name)
        if command == "publish":
            catalog.publish(name, members(int(argument)))
        elif command == "add":
            catalog.publish(name, [*(current.members if current else ()), argument])
        print("ok", flush=True)
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
