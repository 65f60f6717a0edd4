"""Gateway and SyncGateway: validate a tool call, fetch the model-facing Repair message, report outcomes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

import grpc

from argwatch.client._adapters import ProviderToolCall
from argwatch.client._errors import gateway_errors
from argwatch.client._outcome import CallOutcome, Outcome, outcome_value
from argwatch.client._session import NO_SESSION, Session
from argwatch.client._trace_context import trace_metadata
from argwatch.common.channels import aio_channel, blocking_channel, service_config_options
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc

DEFAULT_TIMEOUT = 2.0  # seconds; the service config's figure for Validate and Repair

ChannelT = TypeVar("ChannelT", grpc.Channel, grpc.aio.Channel)


class BaseGateway(ABC, Generic[ChannelT]):
    """What Gateway and SyncGateway share: the channel's settings and every request they send, so the two
    cannot drift. Only sending differs: awaited in one, blocking in the other."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """Opens a channel to the gateway (connected on first use) with the published service config.

        Args:
            target: The gateway's address, "host:port".
            timeout: Each call's deadline, in seconds.
            credentials: For TLS (`grpc.ssl_channel_credentials(...)`); plaintext without them.
        """
        self._channel: ChannelT = self._connect(target, credentials)
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)
        self._timeout = timeout

    @staticmethod
    @abstractmethod
    def _connect(target: str, credentials: grpc.ChannelCredentials | None) -> ChannelT:
        """The channel: asyncio in Gateway, blocking in SyncGateway."""

    @staticmethod
    def _validate_request(call: ProviderToolCall[object], session: Session) -> pb.ValidateRequest:
        return pb.ValidateRequest(
            tool=call.tool,
            arguments_json=call.arguments_json,
            call_id=call.call_id,
            conversation_id=session.conversation_id,
            session=_wire(session),
            model=session.model,
            prompt_version=session.prompt_version,
        )

    @staticmethod
    def _repair_request(verdict: pb.ValidateResponse, session: Session) -> pb.RepairRequest | None:
        """What to ask Repair for a rejected call; None for one that goes ahead."""
        if verdict.decision != pb.DECISION_REJECT:
            return None
        return pb.RepairRequest(
            call_id=verdict.call_id, conversation_id=session.conversation_id, session=_wire(session)
        )

    @staticmethod
    def _outcome(verdict: pb.ValidateResponse, advice: pb.RepairResponse | None, session: Session) -> Outcome:
        return Outcome(advice is None, "" if advice is None else advice.message, verdict, session)

    @staticmethod
    def _outcome_request(call: Outcome | str, outcome: CallOutcome, session: Session) -> pb.ReportOutcomeRequest:
        wire_outcome = outcome_value(outcome)
        call_id, session = (call.call_id, call.session) if isinstance(call, Outcome) else (call, session)
        return pb.ReportOutcomeRequest(
            call_id=call_id, outcome=wire_outcome, conversation_id=session.conversation_id, session=_wire(session)
        )


def _wire(session: Session) -> pb.Session:
    return pb.Session(customer_id=session.customer_id, tenant=session.tenant)


class Gateway(BaseGateway[grpc.aio.Channel]):
    """An asyncio client of one gateway. Use it as `async with`, or call close()."""

    @staticmethod
    def _connect(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
        return aio_channel(target, credentials=credentials, options=service_config_options())

    async def check(self, call: ProviderToolCall[object], session: Session = NO_SESSION) -> Outcome:
        """Validates `call`; on a rejection, asks Repair for the message the model should get.

        Args:
            call: The tool call, from an adapter (`from_openai`, `from_anthropic`, ...).
            session: Who and what the call is for: its conversation, customer, tenant, model, prompt version.

        Returns:
            Whether to run the tool, or the message to hand back to the model.

        Raises:
            GatewayUnavailable: No verdict (unreachable, past the deadline): do not run the tool.
            GatewayRejectedRequest: The gateway refused the request itself (a field past its length limit).
        """
        with gateway_errors(f"{call.tool} was not run"):
            verdict: pb.ValidateResponse = await self._stub.Validate(
                self._validate_request(call, session), timeout=self._timeout, metadata=trace_metadata()
            )
            repair = self._repair_request(verdict, session)
            advice = (
                None
                if repair is None
                else await self._stub.Repair(repair, timeout=self._timeout, metadata=trace_metadata())
            )
        return self._outcome(verdict, advice, session)

    async def report_outcome(
        self, call: Outcome | str, outcome: CallOutcome, session: Session = NO_SESSION
    ) -> pb.ReportOutcomeResponse:
        """Tells the gateway how a call of a tool with side effects went, so a genuine retry is told from a repeat.

        Args:
            call: What check() returned (it knows where it was checked), or a call id.
            outcome: "succeeded"; "failed" only when the service guarantees nothing happened (a repeat is
                then let through as a retry); "unknown" for a timeout (a repeat is refused until the model
                has called the tool's status tool).
            session: With a call id, the session its check had: a call is found only where it was made.
                Unused with an Outcome.

        Raises:
            InvalidInput: `outcome` is not one of the three.
            GatewayRejectedRequest: NOT_FOUND: no such call in that conversation and session.
            GatewayUnavailable: No answer; the outcome may not have been recorded.
        """
        request = self._outcome_request(call, outcome, session)
        with gateway_errors("the outcome was not recorded"):
            response: pb.ReportOutcomeResponse = await self._stub.ReportOutcome(request, timeout=self._timeout)
        return response

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SyncGateway(BaseGateway[grpc.Channel]):
    """The same as Gateway, blocking, for code without an event loop. Use it as `with`, or call close()."""

    @staticmethod
    def _connect(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
        return blocking_channel(target, credentials=credentials, options=service_config_options())

    def check(self, call: ProviderToolCall[object], session: Session = NO_SESSION) -> Outcome:
        """As Gateway.check, blocking.

        Args:
            call: The tool call, from an adapter (`from_openai`, `from_anthropic`, ...).
            session: Who and what the call is for: its conversation, customer, tenant, model, prompt version.
        """
        with gateway_errors(f"{call.tool} was not run"):
            verdict: pb.ValidateResponse = self._stub.Validate(
                self._validate_request(call, session), timeout=self._timeout, metadata=trace_metadata()
            )
            repair = self._repair_request(verdict, session)
            advice = (
                None if repair is None else self._stub.Repair(repair, timeout=self._timeout, metadata=trace_metadata())
            )
        return self._outcome(verdict, advice, session)

    def report_outcome(
        self, call: Outcome | str, outcome: CallOutcome, session: Session = NO_SESSION
    ) -> pb.ReportOutcomeResponse:
        """As Gateway.report_outcome, blocking.

        Args:
            call: What check() returned, or a call id.
            outcome: "succeeded", "failed" or "unknown".
            session: With a call id, the session its check had. Unused with an Outcome.
        """
        request = self._outcome_request(call, outcome, session)
        with gateway_errors("the outcome was not recorded"):
            response: pb.ReportOutcomeResponse = self._stub.ReportOutcome(request, timeout=self._timeout)
        return response

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> SyncGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
