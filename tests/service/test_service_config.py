"""The published service config (proto/argwatch/v1/service_config.json): retries on UNAVAILABLE only, and deadlines.

grpc-python applies a service config's timeout about a second early, or sooner
(grpc/grpc#34547), so Python callers drop the config's timeouts and set their own
deadline per call (as these tests do); the timeouts are for other languages.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from importlib import resources

import grpc
import pytest

from argwatch.v1 import admin_pb2, gateway_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.service.helpers import serve_raw

CONFIG = resources.files("argwatch.v1").joinpath("service_config.json").read_text()


def test_it_names_only_methods_the_protos_define() -> None:
    services = {
        service.full_name: set(service.methods_by_name)
        for module in (gateway_pb2, admin_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
    }
    config = json.loads(CONFIG)
    for entry in config["methodConfig"]:
        for name in entry["name"]:
            assert name["service"] in services
            assert "method" not in name or name["method"] in services[name["service"]]
        retry = entry.get("retryPolicy")
        if retry is not None:  # a rejection is a verdict in a normal response: only a gateway not there is retried
            assert retry["retryableStatusCodes"] == ["UNAVAILABLE"]


class ScriptedGateway:
    """A real gRPC server answering Validate with the planned outcomes in turn, counting the attempts."""

    def __init__(self, plan: list[grpc.StatusCode | None]) -> None:
        self.plan, self.attempts = plan, 0

    async def validate(self, body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        outcome = self.plan[min(self.attempts, len(self.plan) - 1)]
        self.attempts += 1
        if outcome is not None:
            await context.abort(outcome, f"planned {outcome.name}")
        return pb.ValidateResponse(call_id="c1", decision=pb.DECISION_ALLOW).SerializeToString()


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[ScriptedGateway, str]]:
    gateway = ScriptedGateway([])
    handler: grpc.RpcMethodHandler = grpc.unary_unary_rpc_method_handler(gateway.validate)
    server, target = await serve_raw("argwatch.v1.Gateway", {"Validate": handler})
    yield gateway, target
    await server.stop(0)


def without_timeouts(config: str) -> str:
    """The config as a Python client should load it: grpc-python fires a config's timeout early
    (a 2 s one failed a retried call within the first second on a loaded machine), so Python
    callers drop them and pass timeout= per call instead."""
    parsed = json.loads(config)
    for entry in parsed["methodConfig"]:
        entry.pop("timeout", None)
    return json.dumps(parsed)


async def validate_with_config(target: str) -> pb.ValidateResponse:
    options = [("grpc.service_config", without_timeouts(CONFIG)), ("grpc.enable_retries", 1)]
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(
            "/argwatch.v1.Gateway/Validate",
            request_serializer=pb.ValidateRequest.SerializeToString,
            response_deserializer=pb.ValidateResponse.FromString,
        )
        response: pb.ValidateResponse = await call(pb.ValidateRequest(tool="refund_order"), timeout=5)
        return response


async def test_unavailable_is_retried_and_the_call_succeeds(scripted: tuple[ScriptedGateway, str]) -> None:
    gateway, target = scripted
    gateway.plan = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE, None]
    response = await validate_with_config(target)
    assert response.decision == pb.DECISION_ALLOW
    assert gateway.attempts == 3


@pytest.mark.parametrize("code", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL])
async def test_nothing_else_is_retried(scripted: tuple[ScriptedGateway, str], code: grpc.StatusCode) -> None:
    gateway, target = scripted
    gateway.plan = [code, None]
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await validate_with_config(target)
    assert failed.value.code() == code
    assert gateway.attempts == 1


def test_every_unary_gateway_and_admin_call_has_a_deadline() -> None:
    config = json.loads(CONFIG)
    timed = {
        (name["service"], name.get("method", "*")): entry.get("timeout")
        for entry in config["methodConfig"]
        for name in entry["name"]
    }
    assert timed[("argwatch.v1.Gateway", "Validate")] == "2s"
    assert timed[("argwatch.v1.Gateway", "Repair")] == "2s"
    assert timed[("argwatch.v1.Admin", "*")] == "10s"
    # Streams live as long as the caller wants them.
    assert timed[("argwatch.v1.Gateway", "ValidateStream")] is None
    assert timed[("argwatch.v1.Admin", "WatchStatus")] is None
