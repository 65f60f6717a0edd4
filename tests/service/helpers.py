"""Helpers for service tests: stubs on a running gateway, requests, and reading its counters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import orjson
from prometheus_client import CollectorRegistry

from argwatch.server.app import RunningGateway
from argwatch.v1 import admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc


def gateway_stub(gateway: RunningGateway) -> tuple[grpc.aio.Channel, gateway_pb2_grpc.GatewayStub]:
    channel = grpc.aio.insecure_channel(gateway.target)
    return channel, gateway_pb2_grpc.GatewayStub(channel)


def admin_stub(gateway: RunningGateway) -> tuple[grpc.aio.Channel, admin_pb2_grpc.AdminStub]:
    channel = grpc.aio.insecure_channel(gateway.admin_target)
    return channel, admin_pb2_grpc.AdminStub(channel)


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


async def eventually(condition: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    """Polls `condition` until it holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition did not hold within {seconds}s")
        await asyncio.sleep(0.05)
