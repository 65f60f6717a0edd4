"""The Gateway servicer: Validate, ValidateStream, Repair, GetToolDefinitions and ReportOutcome."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from time import perf_counter
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from argwatch.server.edge import wire
from argwatch.server.edge.request_limits import TooLong, check_call_id, check_validate
from argwatch.server.policy.tool_export import export_tools
from argwatch.server.validator import Validator
from argwatch.v1 import gateway_pb2, gateway_pb2_grpc

SERVICE = "argwatch.v1.Gateway"
_FORMATS = {
    gateway_pb2.TOOL_FORMAT_OPENAI: "openai",
    gateway_pb2.TOOL_FORMAT_ANTHROPIC: "anthropic",
    gateway_pb2.TOOL_FORMAT_MCP: "mcp",
}


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Answers every call with a verdict; status codes only for protocol errors."""

    def __init__(self, validator: Validator, observe_seconds: Callable[[float], None] | None = None) -> None:
        self._validator = validator
        self._observe = observe_seconds if observe_seconds is not None else _ignore

    def use(self, validator: Validator) -> None:
        """A reloaded policy's validator: each call reads the reference once, so one in flight keeps its own."""
        self._validator = validator

    async def Validate(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        started = perf_counter()
        try:
            request = _checked(body)
        except (DecodeError, TooLong) as error:
            await self._refuse(context, error)
        verdict = await self._validator.validate(wire.call_from_request(request), context.time_remaining())
        response = wire.verdict_to_wire(verdict)
        self._observe(perf_counter() - started)
        return response

    async def ValidateStream(
        self, bodies: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        # One at a time, in order: a check awaits only the in-memory cache, so
        # concurrency inside one stream would add scheduling cost and no speed.
        async for body in bodies:
            started = perf_counter()
            try:
                request = _checked(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            verdict = await self._validator.validate(wire.call_from_request(request))
            response = wire.verdict_to_wire(verdict)
            self._observe(perf_counter() - started)
            yield response

    async def Repair(
        self,
        request: gateway_pb2.RepairRequest,
        context: grpc.aio.ServicerContext[gateway_pb2.RepairRequest, gateway_pb2.RepairResponse],
    ) -> gateway_pb2.RepairResponse:
        await self._check_call_id(request.call_id, context)
        advice = await self._validator.repair(request.call_id)
        if advice is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no rejected call {request.call_id!r}: it was allowed, never seen, or forgotten "
                "(rejected calls are remembered for the policy's repair.remember)",
            )
        assert advice is not None  # abort raises
        return wire.advice_to_response(advice)

    async def _check_call_id(self, call_id: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """Repair's and ReportOutcome's call id: required, and within its limit (INVALID_ARGUMENT otherwise)."""
        if not call_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "call_id is required")
        try:
            check_call_id(call_id)
        except TooLong as error:
            await self._refuse(context, error)

    async def _refuse(self, context: grpc.aio.ServicerContext[Any, Any], error: DecodeError | TooLong) -> None:
        """INVALID_ARGUMENT for bytes that are not a request, or a field past its limit (that one counted)."""
        if isinstance(error, TooLong):
            self._validator.metrics.request_refused(error.field)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not a ValidateRequest: {error}")

    async def GetToolDefinitions(
        self,
        request: gateway_pb2.GetToolDefinitionsRequest,
        context: grpc.aio.ServicerContext[
            gateway_pb2.GetToolDefinitionsRequest, gateway_pb2.GetToolDefinitionsResponse
        ],
    ) -> gateway_pb2.GetToolDefinitionsResponse:
        validator = self._validator  # one policy for the whole answer, even across a reload
        policy = validator.policy
        wanted = list(dict.fromkeys(request.tools))  # each once: 300,000 copies of one name stalled the loop
        unknown = [name for name in wanted if name not in policy.tools]
        if unknown:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no such tool in the policy: {', '.join(unknown)}")
        shape = _FORMATS.get(request.format, "mcp")
        exported, version = export_tools(policy, wanted, validator.read_set, shape)
        response = gateway_pb2.GetToolDefinitionsResponse(version=version)
        for tool in exported:
            response.tools.add(
                name=tool.name,
                definition_json=json.dumps(tool.definition),
                version=tool.version,
                value_sets=[wire.version_of(reading) for reading in tool.readings],
            )
        return response

    async def ReportOutcome(
        self,
        request: gateway_pb2.ReportOutcomeRequest,
        context: grpc.aio.ServicerContext[gateway_pb2.ReportOutcomeRequest, gateway_pb2.ReportOutcomeResponse],
    ) -> gateway_pb2.ReportOutcomeResponse:
        await self._check_call_id(request.call_id, context)
        outcome = wire.OUTCOMES_FROM_WIRE.get(request.outcome)
        if outcome is None:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "outcome must be OUTCOME_SUCCEEDED, OUTCOME_FAILED or OUTCOME_UNKNOWN"
            )
        assert outcome is not None  # abort raises
        record = await self._validator.report_outcome(request.call_id, outcome)
        if record is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no call {request.call_id!r} of a tool with side effects that could run: it was refused, is "
                "of a tool without side_effect in the policy, was never seen, or its window has passed",
            )
        assert record is not None
        return gateway_pb2.ReportOutcomeResponse(
            call_id=request.call_id, idempotency_key=record.key, outcome=wire.OUTCOMES[record.outcome]
        )


def add_gateway_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
    """Registers the Gateway service as the generated code would, except that Validate and
    ValidateStream take and give bytes: they parse the request themselves (an undecodable one is
    INVALID_ARGUMENT, with why) and answer with bytes already serialized (wire.verdict_to_wire),
    so gRPC calls no Python (de)serializer for them."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Validate": grpc.unary_unary_rpc_method_handler(servicer.Validate),
        "ValidateStream": grpc.stream_stream_rpc_method_handler(servicer.ValidateStream),
        "Repair": grpc.unary_unary_rpc_method_handler(
            servicer.Repair,
            request_deserializer=gateway_pb2.RepairRequest.FromString,
            response_serializer=gateway_pb2.RepairResponse.SerializeToString,
        ),
        "GetToolDefinitions": grpc.unary_unary_rpc_method_handler(
            servicer.GetToolDefinitions,
            request_deserializer=gateway_pb2.GetToolDefinitionsRequest.FromString,
            response_serializer=gateway_pb2.GetToolDefinitionsResponse.SerializeToString,
        ),
        "ReportOutcome": grpc.unary_unary_rpc_method_handler(
            servicer.ReportOutcome,
            request_deserializer=gateway_pb2.ReportOutcomeRequest.FromString,
            response_serializer=gateway_pb2.ReportOutcomeResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)


_parse = gateway_pb2.ValidateRequest.FromString


def _checked(body: bytes) -> gateway_pb2.ValidateRequest:
    """The request in `body`; DecodeError for bytes that are not one, TooLong for a field past its limit."""
    request = _parse(body)
    check_validate(request)
    return request


def _ignore(seconds: float) -> None:
    return None
