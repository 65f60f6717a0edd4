"""What every gate does around the framework: say who the call is for, and report how a side-effecting call went."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from argwatch.client._adapters import ProviderToolCall
from argwatch.client._gateway import Gateway, Outcome

C = TypeVar("C")  # the framework's context object: what a gate hands a callable to find a value
R = TypeVar("R")

# A value a gate sends with each call: fixed (a string), looked up per call in the framework's context
# (a callable), or None for the gate's default (the framework's own conversation id, model name).
Given = str | Callable[[C], str | None] | None


@dataclass(frozen=True, slots=True)
class CallFor(Generic[C]):
    """Who and what a call is for, as the user configured the gate; `resolve` reads it per call."""

    conversation_id: Given[C] = None
    customer_id: Given[C] = None
    tenant: Given[C] = None
    model: Given[C] = None

    def resolve(self, context: C, *, conversation_id: str = "", model: str = "") -> dict[str, str]:
        """Gateway.check's keyword arguments; `conversation_id` and `model` are the framework's own,
        used where the user gave none."""
        return {
            "conversation_id": _value(self.conversation_id, context) or conversation_id,
            "customer_id": _value(self.customer_id, context),
            "tenant": _value(self.tenant, context),
            "model": _value(self.model, context) or model,
        }


def _value(given: Given[C], context: C) -> str:
    if given is None:
        return ""
    found = given(context) if callable(given) else given
    return found if isinstance(found, str) else ""


async def run_allowed(gateway: Gateway, outcome: Outcome, run: Callable[[], Awaitable[R]]) -> R:
    """Runs an allowed call. For a tool with side effects (the verdict carries an idempotency key) the
    gateway is told how it went, so a genuine retry is told from a repeat: "succeeded" when it returned,
    "unknown" when it raised (the gate cannot know whether the operation happened)."""
    if not outcome.verdict.idempotency_key:
        return await run()
    try:
        result = await run()
    except BaseException:
        await gateway.report_outcome(outcome.verdict.call_id, "unknown")
        raise
    await gateway.report_outcome(outcome.verdict.call_id, "succeeded")
    return result


__all__ = ["CallFor", "Given", "ProviderToolCall", "run_allowed"]
