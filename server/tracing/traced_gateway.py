"""The Gateway servicer with a span per Validate, per ValidateStream message and per Repair, in the caller's trace.

The spans carry the GenAI semantic conventions' names for what the model wrote
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.conversation.id`) and the
verdict (`argwatch.decision`, `argwatch.mode`, `argwatch.problem_count`). Span
names are fixed: what a caller wrote goes in attributes, cut to MAX_TEXT.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from argwatch.server.edge import wire
from argwatch.server.edge.admission import Admission
from argwatch.server.edge.gateway_service import SERVICE, GatewayServicer, checked_request
from argwatch.server.edge.request_limits import TooLong
from argwatch.server.tracing.trace_context import caller_context
from argwatch.server.validator import Validator
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import gateway_pb2

# Model-written text in an attribute is cut to this, as in the decision log's lines: a span stays bounded.
MAX_TEXT = 256
VALIDATE_SPAN = "argwatch.Validate"
STREAM_SPAN = "argwatch.ValidateStream"
REPAIR_SPAN = "argwatch.Repair"


def _rpc(method: str) -> dict[str, AttributeValue]:
    return {"rpc.system": "grpc", "rpc.service": SERVICE, "rpc.method": method}


_VALIDATE = _rpc("Validate")
_STREAM = _rpc("ValidateStream")
_REPAIR = _rpc("Repair")


class TracedGatewayServicer(GatewayServicer):
    """GatewayServicer, each verdict and repair a span; the latency histogram's observation keeps the trace id."""

    def __init__(
        self,
        validator: Validator,
        admission: Admission,
        *,
        tracer: Tracer,
        observe_traced: Callable[[float, str], None],
        **options: Any,
    ) -> None:
        super().__init__(validator, admission, **options)
        self._tracer = tracer
        self._observe_traced = observe_traced

    async def Validate(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return await self._traced(VALIDATE_SPAN, _VALIDATE, body, context, context.time_remaining())

    async def _judge(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        # Each message its own span, each a child of the context the stream was opened with.
        return await self._traced(STREAM_SPAN, _STREAM, body, context, None)

    async def _traced(
        self,
        name: str,
        rpc: dict[str, AttributeValue],
        body: bytes,
        context: grpc.aio.ServicerContext[Any, Any],
        deadline: float | None,
    ) -> bytes:
        started = perf_counter()
        # Started, not made current: nothing inside opens a span of its own, and attaching a context costs more.
        span = self._tracer.start_span(name, caller_context(context), SpanKind.SERVER, rpc)
        try:
            try:
                request = checked_request(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            call = wire.call_from_request(request)
            verdict = await self._validator.validate(call, deadline)
            response = wire.verdict_to_wire(verdict)
            if span.is_recording():
                span.set_attributes(verdict_attributes(call, verdict))
        except BaseException as error:
            _failed(span, error)
            raise
        finally:
            span.end()
        spanned = span.get_span_context()
        seconds = perf_counter() - started
        if spanned.trace_flags.sampled:
            self._observe_traced(seconds, format(spanned.trace_id, "032x"))
        else:  # not exported: an exemplar would lead nowhere
            self._observe(seconds)
        return response

    async def Repair(
        self,
        request: gateway_pb2.RepairRequest,
        context: grpc.aio.ServicerContext[gateway_pb2.RepairRequest, gateway_pb2.RepairResponse],
    ) -> gateway_pb2.RepairResponse:
        span = self._tracer.start_span(REPAIR_SPAN, caller_context(context), SpanKind.SERVER, _REPAIR)
        try:
            if span.is_recording():
                span.set_attributes(_ids(request.call_id, request.conversation_id))
            response = await super().Repair(request, context)
            if span.is_recording():
                span.set_attributes(
                    {
                        "argwatch.problem_count": len(response.problems),
                        "argwatch.repair.attempt": response.attempt,
                        "argwatch.repair.give_up": response.give_up,
                    }
                )
            return response
        except BaseException as error:
            _failed(span, error)
            raise
        finally:
            span.end()


def verdict_attributes(call: ToolCall, verdict: Verdict) -> dict[str, AttributeValue]:
    """What a span tells of one judged call: whose call it was, and what was decided."""
    attributes = _ids(call.call_id, call.conversation_id)
    attributes["gen_ai.tool.name"] = call.tool[:MAX_TEXT]
    if call.model:
        attributes["gen_ai.request.model"] = call.model[:MAX_TEXT]
    attributes["argwatch.decision"] = verdict.decision.value
    attributes["argwatch.mode"] = verdict.mode.value
    attributes["argwatch.problem_count"] = len(verdict.problems)
    if verdict.problems:  # the codes are the policy's fixed vocabulary, never model-written
        attributes["argwatch.problem_codes"] = sorted({problem.code.value for problem in verdict.problems})
    attributes["argwatch.policy_version"] = verdict.policy_version
    return attributes


def _ids(call_id: str, conversation_id: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {"gen_ai.tool.call.id": call_id[:MAX_TEXT]}
    if conversation_id:
        attributes["gen_ai.conversation.id"] = conversation_id[:MAX_TEXT]
    return attributes


def _failed(span: Span, error: BaseException) -> None:
    """A call answered with a status code (a refused request, an unknown repair) or cut short: an error span."""
    if isinstance(error, Exception) and span.is_recording():
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.record_exception(error)
