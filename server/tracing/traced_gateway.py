"""The Gateway servicer with a span per Validate, per ValidateStream message and per Repair, in the caller's trace.

The spans carry the GenAI semantic conventions' names for what the model wrote
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.conversation.id`) and the
verdict (`argwatch.decision`, `argwatch.mode`, `argwatch.problem_count`). Span
names are fixed: what a caller wrote goes in attributes, cut to MAX_TEXT.
"""

from __future__ import annotations

from collections.abc import Callable
from random import random
from time import perf_counter, time_ns
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.util.types import AttributeValue

from argwatch.server.edge import wire
from argwatch.server.edge.admission import Admission
from argwatch.server.edge.gateway_service import SERVICE, GatewayServicer, checked_request
from argwatch.server.edge.request_limits import TooLong
from argwatch.server.tracing.otlp_encoding import span_head
from argwatch.server.tracing.span_export import Pending, SpanExport, new_span_id, new_trace_id
from argwatch.server.tracing.trace_context import Parent, caller_parent
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


_VALIDATE = span_head(VALIDATE_SPAN, _rpc("Validate"))
_STREAM = span_head(STREAM_SPAN, _rpc("ValidateStream"))
_REPAIR = span_head(REPAIR_SPAN, _rpc("Repair"))


class TracedGatewayServicer(GatewayServicer):
    """GatewayServicer, each verdict and repair a span; the latency histogram's observation keeps the trace id.

    A call whose caller sampled its trace out (`traceparent` flags 00) is served as the plain servicer serves
    it, with no span; of those without a `traceparent`, a fraction `sample_ratio` start a trace of their own."""

    def __init__(
        self,
        validator: Validator,
        admission: Admission,
        *,
        spans: SpanExport,
        observe_traced: Callable[[float, str], None],
        sample_ratio: float = 1.0,
        **options: Any,
    ) -> None:
        super().__init__(validator, admission, **options)
        self._spans = spans
        self._observe_traced = observe_traced
        self._ratio = sample_ratio

    def _sampled(self, parent: Parent | None) -> bool:
        """The caller's decision when it sent one; else a draw at --otlp-sample-ratio."""
        if parent is not None:
            return parent.sampled
        return self._ratio >= 1.0 or random() < self._ratio

    async def Validate(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return await self._traced(_VALIDATE, body, context, context.time_remaining(), GatewayServicer.Validate)

    async def _judge(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        # Each message its own span, each a child of the context the stream was opened with.
        return await self._traced(_STREAM, body, context, None, GatewayServicer._judge)

    async def _traced(
        self,
        head: bytes,
        body: bytes,
        context: grpc.aio.ServicerContext[Any, Any],
        deadline: float | None,
        untraced: Callable[[GatewayServicer, bytes, grpc.aio.ServicerContext[Any, Any]], Any],
    ) -> bytes:
        parent = caller_parent(context)
        if not self._sampled(parent):
            return await untraced(self, body, context)  # type: ignore[no-any-return]
        started, start_ns = perf_counter(), time_ns()
        trace_id, span_id = (parent.trace_id if parent is not None else new_trace_id()), new_span_id()
        try:
            try:
                request = checked_request(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            call = wire.call_from_request(request)
            verdict = await self._validator.validate(call, deadline)
            response = wire.verdict_to_wire(verdict)
        except BaseException as error:
            self._spans.offer(Pending(head, parent, trace_id, span_id, start_ns, time_ns(), _none, (), _named(error)))
            raise
        self._spans.offer(
            Pending(head, parent, trace_id, span_id, start_ns, time_ns(), verdict_attributes, (call, verdict), "")
        )
        self._observe_traced(perf_counter() - started, trace_id)
        return response

    async def Repair(
        self,
        request: gateway_pb2.RepairRequest,
        context: grpc.aio.ServicerContext[gateway_pb2.RepairRequest, gateway_pb2.RepairResponse],
    ) -> gateway_pb2.RepairResponse:
        parent = caller_parent(context)
        if not self._sampled(parent):
            return await super().Repair(request, context)
        start_ns = time_ns()
        trace_id, span_id = (parent.trace_id if parent is not None else new_trace_id()), new_span_id()
        asked = (request.call_id, request.conversation_id)
        try:
            response = await super().Repair(request, context)
        except BaseException as error:
            self._spans.offer(
                Pending(_REPAIR, parent, trace_id, span_id, start_ns, time_ns(), _ids, asked, _named(error))
            )
            raise
        told = (*asked, len(response.problems), response.attempt, response.give_up)
        self._spans.offer(Pending(_REPAIR, parent, trace_id, span_id, start_ns, time_ns(), repair_attributes, told, ""))
        return response


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


def repair_attributes(
    call_id: str, conversation_id: str, problems: int, attempt: int, give_up: bool
) -> dict[str, AttributeValue]:
    """What a Repair span tells: whose call, and what the advice held."""
    attributes = _ids(call_id, conversation_id)
    attributes["argwatch.problem_count"] = problems
    attributes["argwatch.repair.attempt"] = attempt
    attributes["argwatch.repair.give_up"] = give_up
    return attributes


def _none() -> dict[str, AttributeValue]:
    return {}


def _named(error: BaseException) -> str:
    """A call answered with a status code (a refused request, an unknown repair) or cut short: its span's
    status is ERROR, with the exception's type (never the caller's text) as the message."""
    return type(error).__name__
