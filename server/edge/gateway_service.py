"""The Gateway servicer: Validate, ValidateStream, Repair, GetToolDefinitions and ReportOutcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from time import perf_counter
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from argwatch.server.edge import wire
from argwatch.server.edge.admission import Admission, peer_host
from argwatch.server.edge.idle_watch import ANSWER, REQUEST, IdleWatch
from argwatch.server.edge.request_limits import TooLong, check_call_ref
from argwatch.server.repair.tool_export import export_tools
from argwatch.server.state.call_scope import CallRef
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

    # Whether ValidateStream judges a message in its own loop (False: through _judge, which a subclass wraps).
    _judges_inline = True

    def __init__(
        self,
        validator: Validator,
        admission: Admission,
        *,
        stream_idle_seconds: float = 30.0,
        observe_seconds: Callable[[float], None] | None = None,
        on_idle_close: Callable[[str], None] | None = None,
    ) -> None:
        self._validator = validator
        self.admission = admission
        self._idle_seconds = stream_idle_seconds
        self._observe = observe_seconds if observe_seconds is not None else _ignore
        self._on_idle_close = on_idle_close if on_idle_close is not None else _nothing

    def use(self, validator: Validator) -> None:
        """A reloaded policy's validator: each call reads the reference once, so one in flight keeps its own."""
        self._validator = validator

    async def Validate(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        # _judge's steps written out, not called: a call through it would be a coroutine more on every Validate.
        started = perf_counter()
        # The common call answered from its bytes, its latency observed there (edge/native_answers.py); any
        # other read, judged and observed here. (Read as an attribute, then called: validator.py says why.)
        answer = self._validator.answer
        response = answer(body, started)
        if response is None:
            try:
                call = wire.call_from_body(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            # Judged without awaiting (validate's coroutine) where it can be; a Verdict, a tuple, is never false.
            verdict = self._validator.quick_verdict(call) or await self._validator.validate(
                call, context.time_remaining()
            )
            response = wire.verdict_to_wire(verdict)
            self._observe(perf_counter() - started)
        return response

    async def ValidateStream(
        self, bodies: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> None:
        # One at a time, in order: a check awaits only the in-memory cache, so concurrency inside one
        # stream would add scheduling cost and no speed. Read and written through the context, not an
        # iterator and `yield`, so that each side has a deadline: a stream that sends no request for
        # --stream-idle-seconds, or does not take an answer for as long (a client that stopped reading:
        # gRPC's send waits on flow control), gives its place back.
        watch = IdleWatch(self._idle_seconds)
        clock = watch.clock
        started_is_clock = watch.perf_counter_is_clock
        inline = self._judges_inline
        try:
            while True:
                watch.waiting, watch.since = REQUEST, clock()
                body: bytes | object = await context.read()
                if not isinstance(body, bytes):  # grpc.aio.EOF: the client is done
                    return
                if inline:
                    # _judge's steps written out, not called: a message the quick verdict answers then costs
                    # no coroutine at all (_judge's is left to the traced servicer, which wraps it in a span).
                    started = perf_counter()
                    answer = self._validator.answer  # as Validate
                    response = answer(body, started)
                    if response is not None:  # judged in microseconds: its answer's wait starts as it came
                        watch.waiting, watch.since = ANSWER, started if started_is_clock else clock()
                    else:
                        watch.waiting = None
                        try:
                            call = wire.call_from_body(body)
                        except (DecodeError, TooLong) as error:
                            await self._refuse(context, error)
                        verdict = self._validator.quick_verdict(call) or await self._validator.validate(call)
                        response = wire.verdict_to_wire(verdict)
                        self._observe(perf_counter() - started)
                        watch.waiting, watch.since = ANSWER, clock()
                else:
                    watch.waiting = None
                    response = await self._judge(body, context)
                    watch.waiting, watch.since = ANSWER, clock()
                await context.write(response)
        except asyncio.CancelledError:
            if not watch.expired():
                raise
            self._close_idle(context, watch.waiting or REQUEST)
        finally:
            watch.close()

    def _close_idle(self, context: grpc.aio.ServicerContext[Any, Any], waiting: str) -> None:
        self._on_idle_close(waiting)
        idle = self._idle_seconds
        if waiting == REQUEST:
            why = f"this stream sent no request for {idle:g}s"
        else:
            why = f"this stream did not take an answer for {idle:g}s (it stopped reading)"
        # Set, then return, rather than abort(): abort awaits sending the status, which a client that stopped
        # reading holds behind flow control. Returning ends the handler, and gives the place back, at once.
        context.set_code(grpc.StatusCode.DEADLINE_EXCEEDED)
        context.set_details(
            f"{why}, and the gateway closes idle streams (--stream-idle-seconds): "
            "open a new one when there is a call to check"
        )

    async def _judge(self, body: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        """One ValidateStream message's verdict, as the bytes answered, timed (the traced servicer adds a span)."""
        started = perf_counter()
        answer = self._validator.answer  # as Validate
        response = answer(body, started)
        if response is None:
            try:
                call = wire.call_from_body(body)
            except (DecodeError, TooLong) as error:
                await self._refuse(context, error)
            verdict = self._validator.quick_verdict(call) or await self._validator.validate(call)
            response = wire.verdict_to_wire(verdict)
            self._observe(perf_counter() - started)
        return response

    async def Repair(
        self,
        request: gateway_pb2.RepairRequest,
        context: grpc.aio.ServicerContext[gateway_pb2.RepairRequest, gateway_pb2.RepairResponse],
    ) -> gateway_pb2.RepairResponse:
        call = await self._call_ref(request, context)
        advice = await self._validator.repair(call)
        if advice is None:
            # One answer for every miss: whether the id exists in another conversation is not told.
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no rejected call {request.call_id!r} in this conversation and session: it was allowed, never "
                "seen, forgotten (rejected calls are remembered for the policy's repair.remember), or made in "
                "another conversation or session (send the conversation_id and session its Validate had)",
            )
        assert advice is not None  # abort raises
        return wire.advice_to_response(advice)

    async def _call_ref(
        self,
        request: gateway_pb2.RepairRequest | gateway_pb2.ReportOutcomeRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> CallRef:
        """The call Repair or ReportOutcome names: a call id is required, and every string within its limit
        (INVALID_ARGUMENT otherwise)."""
        if not request.call_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "call_id is required")
        try:
            check_call_ref(request)
        except TooLong as error:
            await self._refuse(context, error)
        session = request.session
        return CallRef(request.call_id, request.conversation_id, session.customer_id, session.tenant)

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
        call = await self._call_ref(request, context)
        outcome = wire.OUTCOMES_FROM_WIRE.get(request.outcome)
        if outcome is None:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "outcome must be OUTCOME_SUCCEEDED, OUTCOME_FAILED or OUTCOME_UNKNOWN"
            )
        assert outcome is not None  # abort raises
        record = await self._validator.report_outcome(call, outcome)
        if record is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no call {request.call_id!r} of a tool with side effects that could run, in this conversation and "
                "session: it was refused, is of a tool without side_effect in the policy, was never seen, its "
                "window has passed, or it was made in another conversation or session (send the conversation_id "
                "and session its Validate had)",
            )
        assert record is not None
        return gateway_pb2.ReportOutcomeResponse(
            call_id=request.call_id, idempotency_key=record.key, outcome=wire.OUTCOMES[record.outcome]
        )


def add_gateway_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
    """Registers the Gateway service as the generated code would, except that Validate and
    ValidateStream take and give bytes: they parse the request themselves (an undecodable one is
    INVALID_ARGUMENT, with why) and answer with bytes already serialized (wire.verdict_to_wire),
    so gRPC calls no Python (de)serializer for them. Every method is admitted first (admission.py)."""
    admission = servicer.admission
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Validate": grpc.unary_unary_rpc_method_handler(_admitted(admission, servicer.Validate)),
        "ValidateStream": grpc.stream_stream_rpc_method_handler(_admitted_stream(admission, servicer.ValidateStream)),
        "Repair": grpc.unary_unary_rpc_method_handler(
            _admitted(admission, servicer.Repair),
            request_deserializer=gateway_pb2.RepairRequest.FromString,
            response_serializer=gateway_pb2.RepairResponse.SerializeToString,
        ),
        "GetToolDefinitions": grpc.unary_unary_rpc_method_handler(
            _admitted(admission, servicer.GetToolDefinitions),
            request_deserializer=gateway_pb2.GetToolDefinitionsRequest.FromString,
            response_serializer=gateway_pb2.GetToolDefinitionsResponse.SerializeToString,
        ),
        "ReportOutcome": grpc.unary_unary_rpc_method_handler(
            _admitted(admission, servicer.ReportOutcome),
            request_deserializer=gateway_pb2.ReportOutcomeRequest.FromString,
            response_serializer=gateway_pb2.ReportOutcomeResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)


def _admitted(
    admission: Admission, method: Callable[[Any, Any], Awaitable[Any]]
) -> Callable[[Any, Any], Awaitable[Any]]:
    """`method`, refused with RESOURCE_EXHAUSTED at once when the Gateway's unary calls are at their cap."""

    @wraps(method)
    async def admitted(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        refusal = admission.enter_unary()
        if refusal:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
        try:
            return await method(request, context)
        finally:
            admission.leave_unary()

    return admitted


def _admitted_stream(
    admission: Admission, method: Callable[[Any, Any], Awaitable[None]]
) -> Callable[[Any, Any], Awaitable[None]]:
    """`method`, refused with RESOURCE_EXHAUSTED at once when streams (all, or this peer's) are at their cap."""

    @wraps(method)
    async def admitted(bodies: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        peer = peer_host(context.peer() or "")
        refusal = admission.enter_stream(peer)
        if refusal:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
        try:
            await method(bodies, context)
        finally:
            admission.leave_stream(peer)

    return admitted


def _ignore(seconds: float) -> None:
    return None


def _nothing(waiting: str) -> None:
    return None
