"""Admin status, gRPC health and server reflection on a real gateway."""

from __future__ import annotations

import base64
import json
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_stub, gateway_stub, request


async def test_admin_status_reports_modes_counts_and_value_sets(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for code in ("DAMAGED_ITEM", "damaged item", "OTHER"):
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
        await stub.Validate(request("no_such_tool", {}), timeout=5)
    channel, admin = admin_stub(gateway)
    async with channel:
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    assert status.replica_id == "test-replica"
    assert status.policy_version == gateway.policy.version
    assert status.global_mode == pb.MODE_UNSPECIFIED
    tools = {t.tool: t for t in status.tools}
    assert list(tools) == ["refund_order", "create_ticket", "transfer_stock", "_unknown"]
    refund = tools["refund_order"]
    assert refund.mode == pb.MODE_REJECT
    assert (refund.calls, refund.allowed, refund.rejected) == (3, 1, 2)
    assert (refund.value_checks, refund.out_of_set, refund.out_of_set_normalised) == (3, 2, 1)
    assert tools["_unknown"].calls == 1
    assert [(c.check, c.argument, c.fails_closed) for c in refund.checks] == [
        ("set:refunds.reason_codes", "reason_code", False)
    ]
    sets = {s.name: s for s in status.value_sets}
    assert sets["refunds.reason_codes"].available
    assert (sets["refunds.reason_codes"].version, sets["refunds.reason_codes"].members) == (1, 4)
    assert sets["wms.warehouses"].source == "local"


async def test_health_is_serving_for_the_server_and_the_gateway_service(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    async with grpc.aio.insecure_channel(gateway.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "argwatch.v1.Gateway"):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_gateway_health_and_reflection_services(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    async with grpc.aio.insecure_channel(gateway.target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def ask() -> reflection_pb2.ServerReflectionResponse:
            call = stub.ServerReflectionInfo(timeout=5)
            await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            await call.done_writing()
            reply = await call.read()
            assert isinstance(reply, reflection_pb2.ServerReflectionResponse)
            return reply

        reply = await ask()
    names = {service.name for service in reply.list_services_response.service}
    assert names == {"argwatch.v1.Gateway", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}


async def test_stop_reports_not_serving_before_closing(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    channel = grpc.aio.insecure_channel(gateway.target)
    stub = health_pb2_grpc.HealthStub(channel)
    watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    await gateway.stop(0.5)
    seen = await watch.read()
    assert seen.status == health_pb2.HealthCheckResponse.NOT_SERVING
    await channel.close()


async def test_in_flight_calls_are_answered_during_the_grace_period(gateway_factory: GatewayFactory) -> None:
    """A stream open when shutdown starts keeps getting verdicts until the grace period ends."""
    import asyncio

    gateway = await gateway_factory()
    channel, stub = gateway_stub(gateway)
    async with channel:
        health = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert (await health.read()).status == health_pb2.HealthCheckResponse.SERVING
        stream = stub.ValidateStream(timeout=10)
        await stream.write(request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id="before"))
        assert (await stream.read()).call_id == "before"
        stopping = asyncio.create_task(gateway.stop(grace=3.0))
        # Shutdown is under way once health says so.
        assert (await health.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert not stopping.done()
        await stream.write(request("refund_order", {"reason_code": "OTHER"}, call_id="during"))
        answer = await stream.read()
        assert answer.call_id == "during" and len(answer.problems) == 1
        await stream.done_writing()
        await stopping


def _call_validate_as_a_generic_client(target: str, arguments: dict[str, object]) -> dict[str, Any]:
    """What grpcurl, Postman or evans do: no generated code, only what reflection says. Blocking (run in a thread)."""
    from google.protobuf import descriptor_pool, json_format, message_factory
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    with grpc.insecure_channel(target) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        service = pool.FindServiceByName("argwatch.v1.Gateway")
        method = service.methods_by_name["Validate"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        # As JSON, the way a generic client takes it from its user: bytes fields are base64.
        body = {"tool": "refund_order", "argumentsJson": base64.b64encode(json.dumps(arguments).encode()).decode()}
        request = json_format.ParseDict(body, request_class())
        call = channel.unary_unary(
            f"/{service.full_name}/{method.name}",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )
        response = call(request, timeout=5)
        assert type(response).__module__ != pb.__name__  # built from reflection, not the generated module
        return json_format.MessageToDict(response)


async def test_a_generic_client_calls_validate_from_what_reflection_describes(gateway_factory: GatewayFactory) -> None:
    import asyncio

    gateway = await gateway_factory(refund_mode="reject")
    clean = await asyncio.to_thread(_call_validate_as_a_generic_client, gateway.target, {"reason_code": "DAMAGED_ITEM"})
    assert clean["decision"] == "DECISION_ALLOW" and "problems" not in clean
    invented = await asyncio.to_thread(_call_validate_as_a_generic_client, gateway.target, {"reason_code": "MADE_UP"})
    assert invented["decision"] == "DECISION_REJECT"
    assert [(p["argument"], p["code"]) for p in invented["problems"]] == [("reason_code", "PROBLEM_CODE_OUT_OF_SET")]
