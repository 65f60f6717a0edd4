"""The benchmark's server process: the real gateway plus a bare echo RPC, on one grpc.aio server and event loop.

Prints its Gateway port on stdout once serving; stops when stdin closes or on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import signal
import sys
import threading
import time
from collections.abc import Callable

import grpc

from argwatch.server.process.app import build_gateway
from argwatch.server.process.settings import Settings
from argwatch.v1 import gateway_pb2

ECHO_SERVICE = "argwatch.bench.Echo"
ECHO_METHOD = f"/{ECHO_SERVICE}/Echo"


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


_FIXED = gateway_pb2.ValidateResponse(
    call_id="call-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    decision=gateway_pb2.DECISION_ALLOW,
    mode=gateway_pb2.MODE_OBSERVE,
    policy_version="0123456789ab",
)


async def _typed(
    request: gateway_pb2.ValidateRequest, context: grpc.aio.ServicerContext
) -> gateway_pb2.ValidateResponse:
    return _FIXED


def add_echo(server: grpc.aio.Server) -> list[str]:
    """The baselines: Echo (bytes in, the same bytes out, no (de)serialisation at all) and
    Typed (parses the ValidateRequest, answers a fixed ValidateResponse: gRPC's cost for
    Validate's messages with no checking)."""
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(_echo),  # no serializers: raw bytes
        "EchoStream": grpc.stream_stream_rpc_method_handler(_echo_stream),
        "Typed": grpc.unary_unary_rpc_method_handler(
            _typed,
            request_deserializer=gateway_pb2.ValidateRequest.FromString,
            response_serializer=gateway_pb2.ValidateResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
    return []


async def _echo_stream(requests, context):  # type: ignore[no-untyped-def]
    async for request in requests:
        yield request


def bench_settings(policy: str) -> Settings:
    """Every listener on a free loopback port, quiet logs: the settings all benchmarks run with."""
    return Settings(
        policy=policy,
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
        metrics_listen="127.0.0.1:0",
        log_level="WARNING",
        grace_seconds=1.0,
    )


def _wait_for_eof(loop: asyncio.AbstractEventLoop, stopping: asyncio.Event) -> None:
    while sys.stdin.buffer.read(65536):
        pass
    loop.call_soon_threadsafe(stopping.set)


async def echo_only() -> None:
    """Only the Echo baseline on a bare grpc.aio server: the same process and imports, no gateway."""
    server = grpc.aio.server()
    add_echo(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    gc.freeze()
    print(port, flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    threading.Thread(target=_wait_for_eof, args=(loop, stopping), daemon=True).start()
    await stopping.wait()
    await server.stop(1.0)


def recording_stages(path: str) -> Callable[[], None]:
    """For refresh.py's propagation: when each value-set delta reached the gateway (parsed off its stream) and
    when its version was installed, on CLOCK_MONOTONIC (one clock for the machine), written to `path` by the
    function returned. A measuring hook over two functions of the gateway, set before it is built."""
    from argwatch.server.sets.payload import DeltaUpdate
    from argwatch.server.sets.snapshot import ValueSetSnapshot
    from argwatch.server.valuesets import grpc_source, set_table

    received: list[tuple[int, float]] = []
    installed: list[tuple[int, float]] = []
    from_wire, replace = grpc_source.delta_from_wire, set_table.SetTable._replace

    def timed_from_wire(delta: object) -> DeltaUpdate:
        update = from_wire(delta)  # type: ignore[arg-type]
        received.append((update.to_version, time.monotonic()))
        return update

    def timed_replace(table: set_table.SetTable, state: set_table.SetState, snapshot: ValueSetSnapshot) -> None:
        replace(table, state, snapshot)
        installed.append((snapshot.version, time.monotonic()))

    grpc_source.delta_from_wire = timed_from_wire  # type: ignore[assignment]
    set_table.SetTable._replace = timed_replace  # type: ignore[method-assign]

    def write() -> None:
        with open(path, "w") as handle:
            json.dump({"received": received, "installed": installed}, handle)

    return write


async def main(policy: str, gate: bool, metrics_listen: str, stages: str | None = None) -> None:
    write_stages = recording_stages(stages) if stages else None
    records = None
    if gate:  # the full gate: the policy is written for a record source started here
        from gate_policy import start_records, write_policy

        records, port = await start_records()
        policy = write_policy(port)
    settings = dataclasses.replace(bench_settings(policy), metrics_listen=metrics_listen)
    gateway = await build_gateway(settings, extra_services=add_echo)
    gc.freeze()  # as `argwatch serve` does
    print(gateway.port, flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    # Stop when the parent closes our stdin (or dies), so no server outlives its benchmark.
    threading.Thread(target=_wait_for_eof, args=(loop, stopping), daemon=True).start()
    await stopping.wait()
    await gateway.stop(1.0)
    if records is not None:
        await records.stop(0)
    if write_stages is not None:
        write_stages()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy")
    parser.add_argument("--echo-only", action="store_true", help="a bare grpc.aio server with only the Echo baseline")
    parser.add_argument("--gate", action="store_true", help="the full gate: schema, record look-up, CEL rules")
    parser.add_argument("--metrics-listen", default="127.0.0.1:0", help="the /metrics address (default: a free port)")
    parser.add_argument("--stages", help="write when each value-set delta arrived and was installed to this file")
    arguments = parser.parse_args()
    if arguments.echo_only:
        asyncio.run(echo_only())
    elif arguments.policy:
        asyncio.run(main(arguments.policy, arguments.gate, arguments.metrics_listen, arguments.stages))
    else:
        parser.error("--policy is required (or --echo-only)")
