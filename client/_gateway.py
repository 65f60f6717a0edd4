"""Gateway and SyncGateway: Validate a tool call, fetch the model-facing Repair message, report outcomes."""

from __future__ import annotations

from typing import NamedTuple

import grpc

from argwatch.client._adapters import ProviderToolCall
from argwatch.common.channels import aio_channel, blocking_channel, service_config_options
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc

DEFAULT_TIMEOUT = 2.0  # seconds; the service config's figure for Validate and Repair


class Conversation(NamedTuple):
    """The conversation and session a call was checked in. The gateway binds a call's records to them:
    Repair and ReportOutcome must name the same, or the call is not found."""

    conversation_id: str = ""
    customer_id: str = ""
    tenant: str = ""

    def session(self) -> pb.Session:
        return pb.Session(customer_id=self.customer_id, tenant=self.tenant)


class Outcome(NamedTuple):
    """What to do with one tool call."""

    go_ahead: bool  # run the tool
    tool_error: str  # when not: Repair's message, to hand back to the model as the tool's result
    verdict: pb.ValidateResponse  # everything the gateway said (problems, skipped checks, versions)
    conversation: Conversation = Conversation()  # where it was checked: report_outcome names it again

    @property
    def idempotency_key(self) -> str:
        """For a tool with side effects: pass this downstream unchanged, so the operation runs once."""
        return self.verdict.idempotency_key


# What report_outcome takes: how the tool call went.
OUTCOMES = {"succeeded": pb.OUTCOME_SUCCEEDED, "failed": pb.OUTCOME_FAILED, "unknown": pb.OUTCOME_UNKNOWN}


def _outcome_request(call: Outcome | str, outcome: str, conversation: Conversation) -> pb.ReportOutcomeRequest:
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    if isinstance(call, Outcome):
        call_id, conversation = call.verdict.call_id, call.conversation
    else:
        call_id = call
    return pb.ReportOutcomeRequest(
        call_id=call_id,
        outcome=OUTCOMES[outcome],
        conversation_id=conversation.conversation_id,
        session=conversation.session(),
    )


def _request(call: ProviderToolCall, conversation: Conversation, model: str, prompt_version: str) -> pb.ValidateRequest:
    return pb.ValidateRequest(
        tool=call.tool,
        arguments_json=call.arguments_json,
        call_id=call.call_id,
        conversation_id=conversation.conversation_id,
        session=conversation.session(),
        model=model,
        prompt_version=prompt_version,
    )


def _repair_request(verdict: pb.ValidateResponse, conversation: Conversation) -> pb.RepairRequest:
    return pb.RepairRequest(
        call_id=verdict.call_id, conversation_id=conversation.conversation_id, session=conversation.session()
    )


class Gateway:
    """An asyncio client of one gateway. Use it as `async with`, or call close()."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._channel = aio_channel(target, credentials=credentials, options=service_config_options())
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)
        self._timeout = timeout

    async def check(
        self,
        call: ProviderToolCall,
        *,
        conversation_id: str = "",
        customer_id: str = "",
        tenant: str = "",
        model: str = "",
        prompt_version: str = "",
    ) -> Outcome:
        """Validates `call`; on a rejection, asks Repair for the message the model should get."""
        conversation = Conversation(conversation_id, customer_id, tenant)
        verdict: pb.ValidateResponse = await self._stub.Validate(
            _request(call, conversation, model, prompt_version), timeout=self._timeout
        )
        if verdict.decision != pb.DECISION_REJECT:
            return Outcome(True, "", verdict, conversation)
        advice: pb.RepairResponse = await self._stub.Repair(
            _repair_request(verdict, conversation), timeout=self._timeout
        )
        return Outcome(False, advice.message, verdict, conversation)

    async def report_outcome(
        self,
        call: Outcome | str,
        outcome: str,
        *,
        conversation_id: str = "",
        customer_id: str = "",
        tenant: str = "",
    ) -> pb.ReportOutcomeResponse:
        """How a tool call with side effects went: "succeeded", "failed" (the service guarantees nothing
        happened) or "unknown" (a timeout). A repeat after "failed" is then let through as a retry.

        `call` is what check() returned (it knows its conversation and session), or a call id with the
        conversation_id, customer_id and tenant its check had: a call is found only where it was made."""
        request = _outcome_request(call, outcome, Conversation(conversation_id, customer_id, tenant))
        response: pb.ReportOutcomeResponse = await self._stub.ReportOutcome(request, timeout=self._timeout)
        return response

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SyncGateway:
    """The same as Gateway, blocking, for code without an event loop."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._channel = blocking_channel(target, credentials=credentials, options=service_config_options())
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)
        self._timeout = timeout

    def check(
        self,
        call: ProviderToolCall,
        *,
        conversation_id: str = "",
        customer_id: str = "",
        tenant: str = "",
        model: str = "",
        prompt_version: str = "",
    ) -> Outcome:
        conversation = Conversation(conversation_id, customer_id, tenant)
        verdict: pb.ValidateResponse = self._stub.Validate(
            _request(call, conversation, model, prompt_version), timeout=self._timeout
        )
        if verdict.decision != pb.DECISION_REJECT:
            return Outcome(True, "", verdict, conversation)
        advice: pb.RepairResponse = self._stub.Repair(_repair_request(verdict, conversation), timeout=self._timeout)
        return Outcome(False, advice.message, verdict, conversation)

    def report_outcome(
        self,
        call: Outcome | str,
        outcome: str,
        *,
        conversation_id: str = "",
        customer_id: str = "",
        tenant: str = "",
    ) -> pb.ReportOutcomeResponse:
        """As Gateway.report_outcome."""
        request = _outcome_request(call, outcome, Conversation(conversation_id, customer_id, tenant))
        response: pb.ReportOutcomeResponse = self._stub.ReportOutcome(request, timeout=self._timeout)
        return response

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> SyncGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
