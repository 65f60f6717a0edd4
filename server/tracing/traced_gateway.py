"""The Gateway servicer with a span per Validate, per ValidateStream message and per Repair, in the caller's trace.

The spans carry the GenAI semantic conventions' names for what the model wrote
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.conversation.id`) and the
verdict (`argwatch.decision`, `argwatch.mode`, `argwatch.problem_count`). Span
names are fixed: what a caller wrote goes in attributes, cut to MAX_TEXT.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from random import random
from time import perf_counter, time_ns
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.util.types import AttributeValue

from argwatch.server.edge import wire
from argwatch.server.edge.admission import Admission
from argwatch.server.edge.gateway_service import SERVICE, GatewayServicer
from argwatch.server.edge.request_limits import TooLong
from argwatch.server.tracing._otlp import verdict_span
from argwatch.server.tracing.otlp_encoding import span_head
from argwatch.server.tracing.span_export import SpanExport, encoded_span, new_span_id, new_trace_id
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


_Method = Callable[[Any, bytes, grpc.aio.ServicerContext[Any, Any]], Coroutine[Any, Any, bytes]]


def _traced_method(head: bytes, untraced: _Method, *, deadline: bool) -> _Method:
    """A servicer method that judges a call as `untraced` does, in a span of kind `head`. Made once per method
    rather than called from one: a call through a shared coroutine would be a coroutine more on every call."""

    async def traced(self: TracedGatewayServicer, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        parent = caller_parent(context)
        if not self._sampled(parent):
            return await untraced(self, body, context)
        started, start_ns = perf_counter(), time_ns()
        trace_id, span_id = (parent.trace_id if parent is not None else new_trace_id()), new_span_id()
        try:
            try:
                call = wire.call_from_body(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            verdict = await self._validator.validate(call, context.time_remaining() if deadline else None)
            response = wire.verdict_to_wire(verdict)
        except BaseException as error:
            self._offer(head, parent, trace_id, span_id, start_ns, {}, _named(error))
            raise
        spans = self._spans
        if spans.has_room():
            try:
                spans.offer(judged_span(head, parent, trace_id, span_id, start_ns, time_ns(), call, verdict))
            except Exception:  # the call is decided and answered whatever its span's fate: dropped, counted
                spans.unencodable()
        self._observe_traced(perf_counter() - started, trace_id)
        return response

    return traced


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

    # Each ValidateStream message its own span, each a child of the context the stream was opened with. (mypy
    # sees a callable made at run time, whose parameters it cannot name, where the base has methods.)
    Validate = _traced_method(_VALIDATE, GatewayServicer.Validate, deadline=True)  # type: ignore[assignment]
    _judge = _traced_method(_STREAM, GatewayServicer._judge, deadline=False)  # type: ignore[assignment]
    _judges_inline = False  # every message through _judge, so through its span

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
        try:
            response = await super().Repair(request, context)
        except BaseException as error:
            asked = _ids(request.call_id, request.conversation_id)
            self._offer(_REPAIR, parent, trace_id, span_id, start_ns, asked, _named(error))
            raise
        told = repair_attributes(
            request.call_id, request.conversation_id, len(response.problems), response.attempt, response.give_up
        )
        self._offer(_REPAIR, parent, trace_id, span_id, start_ns, told, "")
        return response

    def _offer(
        self,
        head: bytes,
        parent: Parent | None,
        trace_id: str,
        span_id: int,
        start_ns: int,
        attributes: dict[str, AttributeValue],
        error: str,
    ) -> None:
        """Queues a span ended now, with any attributes: a repair's, or a call answered with an error."""
        if not self._spans.has_room():
            return
        try:
            self._spans.offer(encoded_span(head, parent, trace_id, span_id, start_ns, time_ns(), attributes, error))
        except Exception:  # as for a judged call's span: dropped and counted, never the call's failure
            self._spans.unencodable()


def judged_span(
    head: bytes,
    parent: Parent | None,
    trace_id: str,
    span_id: int,
    start_ns: int,
    end_ns: int,
    call: ToolCall,
    verdict: Verdict,
) -> bytes:
    """A judged call's span, with verdict_attributes' attributes: encoded from the call's and the
    verdict's fields in one native call, without the dict (a test holds the two to the same bytes)."""
    return verdict_span(
        head,
        trace_id,
        span_id,
        parent.span_id if parent is not None else None,
        parent.trace_state if parent is not None else "",
        start_ns,
        end_ns,
        call.call_id,
        call.conversation_id,
        call.tool,
        call.model,
        verdict.decision._value_,  # the plain attribute: `.value` is a property, and slower
        verdict.mode._value_,
        len(verdict.problems),
        sorted({problem.code.value for problem in verdict.problems}) if verdict.problems else (),
        verdict.policy_version,
        MAX_TEXT,
    )


def verdict_attributes(call: ToolCall, verdict: Verdict) -> dict[str, AttributeValue]:
    """What a span tells of one judged call: whose call it was, and what was decided. The definition, which
    `judged_span` writes without making this dict."""
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


def _named(error: BaseException) -> str:
    """A call answered with a status code (a refused request, an unknown repair) or cut short: its span's
    status is ERROR, with the exception's type (never the caller's text) as the message."""
    return type(error).__name__
