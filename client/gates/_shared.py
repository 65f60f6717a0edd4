"""What every gate does around the framework: whom a call is for, a call id of its own, the check, the outcome."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from argwatch.client._adapters import E, ProviderToolCall
from argwatch.client._gateway import Gateway
from argwatch.client._outcome import Outcome
from argwatch.client._session import NO_SESSION, Session

C = TypeVar("C")  # the framework's context object: what a gate hands a callable to find the session
R = TypeVar("R")

# The session a gate sends with each call: fixed, looked up per call in the framework's context (a callable),
# or None for none of the user's own. Either way the framework's own conversation id and model name fill
# the fields the user left empty.
GivenSession = Session | Callable[[C], Session] | None


def session_for(given: GivenSession[C], context: C, *, conversation_id: str = "", model: str = "") -> Session:
    """The session for one call: the user's (read from `context` where it is a callable), with the
    framework's `conversation_id` and `model` where the user gave none."""
    found = given(context) if callable(given) else (given or NO_SESSION)
    return replace(found, conversation_id=found.conversation_id or conversation_id, model=found.model or model)


def own_call_id(call: ProviderToolCall[E]) -> ProviderToolCall[E]:
    """`call` under an id no other check shares. The gateway keeps a rejection under its call id, and a
    provider's ids are unique only within a conversation (scripted and open-weight models write
    "call_1" in every one): two conversations sharing one would read each other's repair message.
    The provider's id stays in front, so the sampled log still leads to the transcript."""
    return replace(call, call_id=f"{call.call_id[:100]}~{uuid.uuid4().hex[:16]}")


async def check(gateway: Gateway, call: ProviderToolCall[object], session: Session) -> Outcome:
    """The gateway's verdict on `call`, under an id of its own (GatewayUnavailable when there is none)."""
    return await gateway.check(own_call_id(call), session)


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


__all__ = ["GivenSession", "check", "own_call_id", "run_allowed", "session_for"]
