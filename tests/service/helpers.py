"""Helpers for service tests: stubs on a running gateway, requests, and reading its counters."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import orjson
from prometheus_client import CollectorRegistry

from argwatch.server.modes.fleet import KEYS, FleetKeys
from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from tests.redis_server import ask


def gateway_stub(gateway: RunningGateway) -> tuple[grpc.aio.Channel, gateway_pb2_grpc.GatewayStub]:
    channel = grpc.aio.insecure_channel(gateway.target)
    return channel, gateway_pb2_grpc.GatewayStub(channel)


def admin_stub(gateway: RunningGateway) -> tuple[grpc.aio.Channel, admin_pb2_grpc.AdminStub]:
    channel = grpc.aio.insecure_channel(gateway.admin_target)
    return channel, admin_pb2_grpc.AdminStub(channel)


async def admin_status(gateway: RunningGateway) -> admin_pb2.GetStatusResponse:
    """One GetStatus from the gateway's Admin API."""
    channel, admin = admin_stub(gateway)
    async with channel:
        found: admin_pb2.GetStatusResponse = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    return found


def request(
    tool: str,
    args: dict[str, Any] | None = None,
    *,
    raw: bytes | None = None,
    conversation: str = "",
    call_id: str = "",
) -> gateway_pb2.ValidateRequest:
    message = gateway_pb2.ValidateRequest(tool=tool, conversation_id=conversation, call_id=call_id)
    if raw is not None:
        message.arguments_json = raw
    elif args is not None:
        message.arguments_json = orjson.dumps(args)
    return message


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0 when the series does not exist yet."""
    return registry.get_sample_value(name, labels) or 0.0


def series_count(registry: CollectorRegistry, prefixes: tuple[str, ...] = ("tool_argument_", "argwatch_")) -> int:
    return sum(1 for family in registry.collect() for sample in family.samples if sample.name.startswith(prefixes))


async def eventually(condition: Callable[[], Awaitable[bool] | bool], seconds: float = 10.0) -> None:
    """Polls `condition` (a coroutine function, or a plain one) until it holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not await _holds(condition):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition did not hold within {seconds}s")
        await asyncio.sleep(0.05)


async def _holds(condition: Callable[[], Awaitable[bool] | bool]) -> bool:
    found = condition()
    return bool(await found) if inspect.isawaitable(found) else bool(found)


async def serve_raw(service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> tuple[grpc.aio.Server, str]:
    """A real grpc.aio server on loopback answering `service` with `handlers` (bytes in and out): a peer
    scripted to misbehave. Returns the started server and its target; the caller stops it."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def run_program(*args: str, env: dict[str, str] | None = None, seconds: float = 60) -> str:
    """Runs a program to the end while the gateway keeps serving on this loop; its stdout, once it exits 0."""
    process = await asyncio.create_subprocess_exec(
        *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=seconds)
    except TimeoutError:
        process.kill()
        raise
    assert process.returncode == 0, f"{args[:2]} exited {process.returncode}: {err.decode()[-3000:]}"
    return out.decode()


def stored_audit(port: int, keys: FleetKeys = KEYS) -> list[dict[str, Any]]:
    """The fleet's audit entries (changes, not refusals) as the Redis on `port` holds them, oldest first: its
    sorted set when the state is stored as a head (format 2), else the whole document's."""
    raw = ask(port, "GET", keys.modes)
    assert isinstance(raw, bytes)
    state = orjson.loads(raw)
    if "log" not in state:
        return list(state["audit"])
    members = ask(port, "ZRANGE", keys.audit, "0", "-1")
    assert isinstance(members, list)
    return [orjson.loads(member) for member in members if isinstance(member, bytes)]
