"""What every gate does around the framework: who a call is for, a call id of its own, the check, and the outcome."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import grpc

from argwatch.client._adapters import ProviderToolCall
from argwatch.client._gateway import Gateway, Outcome

C = TypeVar("C")  # the framework's context object: what a gate hands a callable to find a value
R = TypeVar("R")

# A value a gate sends with each call: fixed (a string), looked up per call in the framework's context
# (a callable), or None for the gate's default (the framework's own conversation id, model name).
Given = str | Callable[[C], object] | None


class GatewayUnavailable(RuntimeError):
    """The gateway gave no verdict (unreachable, or past the deadline): the call was not run. The gRPC
    error is the cause; the message, which a framework may hand the model, names no address."""


@dataclass(frozen=True, slots=True)
class CallFor(Generic[C]):
    """Who and what a call is for, as the user configured the gate; `resolve` reads it per call."""

    conversation_id: Given[C] = None
    customer_id: Given[C] = None
    tenant: Given[C] = None
    model: Given[C] = None
    prompt_version: Given[C] = None

    def resolve(self, context: C, *, conversation_id: str = "", model: str = "") -> dict[str, str]:
        """Gateway.check's keyword arguments; `conversation_id` and `model` are the framework's own,
        used where the user gave none."""
        return {
            "conversation_id": _value(self.conversation_id, context) or conversation_id,
            "customer_id": _value(self.customer_id, context),
            "tenant": _value(self.tenant, context),
            "model": _value(self.model, context) or model,
            "prompt_version": _value(self.prompt_version, context),
        }


def _value(given: Given[C], context: C) -> str:
    if given is None:
        return ""
    found = given(context) if callable(given) else given
    return "" if found is None else str(found)  # a customer id kept as a number is sent as its digits


def own_call_id(call: ProviderToolCall) -> ProviderToolCall:
    """`call` under an id no other check shares. The gateway keeps a rejection under its call id, and a
    provider's ids are unique only within a conversation (scripted and open-weight models write
    "call_1" in every one): two conversations sharing one would read each other's repair message.
    The provider's id stays in front, so the sampled log still leads to the transcript."""
    return replace(call, call_id=f"{call.call_id[:100]}~{uuid.uuid4().hex[:16]}")


async def check(gateway: Gateway, call: ProviderToolCall, found: dict[str, str]) -> Outcome:
    """The gateway's verdict on `call` (under an id of its own), or GatewayUnavailable."""
    try:
        return await gateway.check(own_call_id(call), **found)
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else None
        raise GatewayUnavailable(
            f"argwatch: no verdict from the gateway ({code.name if code else 'error'}); {call.tool} was not run"
        ) from error


async def run_allowed(
    gateway: Gateway,
    outcome: Outcome,
    run: Callable[[], Awaitable[R]],
    failed: Callable[[R], bool] = lambda result: False,
) -> R:
    """Runs an allowed call. For a tool with side effects (the verdict carries an idempotency key) the
    gateway is told how it went, so a genuine retry is told from a repeat: "succeeded" when it returned
    a result, "unknown" when it raised or returned an error result (`failed`): the gate cannot know
    whether the operation happened, and "failed" promises it did not."""
    if not outcome.verdict.idempotency_key:
        return await run()
    try:
        result = await run()
    except BaseException:
        await gateway.report_outcome(outcome, "unknown")
        raise
    await gateway.report_outcome(outcome, "unknown" if failed(result) else "succeeded")
    return result


__all__ = ["CallFor", "GatewayUnavailable", "Given", "check", "own_call_id", "run_allowed"]
