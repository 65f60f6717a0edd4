"""A user's code on argwatch.client, a gate and argwatch.sources, as a type checker sees it installed."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from mcp import ClientSession
from mcp.types import CallToolResult
from openai.types.chat import ChatCompletionMessageToolCall

from argwatch.client import (
    ArgwatchError,
    CallOutcome,
    Gateway,
    GatewayUnavailable,
    OpenAIToolMessage,
    Outcome,
    Problem,
    ProblemCode,
    Session,
    SyncGateway,
    from_openai,
)
from argwatch.client.gates.mcp import GatedSession
from argwatch.sources import PublishedSet, ValueSetCatalog


async def check(gateway: Gateway, tool_call: ChatCompletionMessageToolCall) -> OpenAIToolMessage | None:
    call = from_openai(tool_call)
    try:
        outcome: Outcome = await gateway.check(call, Session(conversation_id="conv-42", customer_id="cus_7"))
    except GatewayUnavailable as error:
        status: str = error.code
        print(status)
        return None
    problems: tuple[Problem, ...] = outcome.problems
    codes: list[ProblemCode] = [problem.code for problem in problems]
    print(codes, outcome.idempotency_key)
    if outcome.go_ahead:
        how: CallOutcome = "succeeded"
        await gateway.report_outcome(outcome, how)
        return None
    reply: OpenAIToolMessage = call.tool_error(outcome.tool_error)
    return reply


def check_blocking(tool_call: ChatCompletionMessageToolCall) -> bool:
    with SyncGateway("127.0.0.1:50051", timeout=1.0) as gateway:
        try:
            go_ahead: bool = gateway.check(from_openai(tool_call)).go_ahead
        except ArgwatchError:
            return False
    return go_ahead


async def gated(client_session: ClientSession, gateway: Gateway) -> bool:
    session = GatedSession(client_session, gateway, session=Session(customer_id="cus_7"))
    result: CallToolResult = await session.call_tool("refund_order", {"reason_code": "DAMAGED_ITEM"})
    return result.is_error


def publish() -> AbstractSet[str]:
    catalog = ValueSetCatalog()
    replaced = {"CUSTOMER_UNHAPPY": "OTHER"}
    published: PublishedSet = catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "OTHER"], replaced_by=replaced)
    return published.retired
