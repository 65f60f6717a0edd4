"""The pydantic-ai gate, run by pydantic-ai's own Agent on its FunctionModel (scripted) against a real gateway."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from argwatch.client import Gateway, Session
from argwatch.client.gates.pydantic_ai import ArgwatchToolset
from argwatch.server.process.app import RunningGateway
from tests.frameworks.expectations import (
    CORRECTED,
    CUSTOMER,
    INVENTED,
    ORDER,
    assert_refused_then_repaired,
    assert_repair_message,
    capture_samples,
)


@dataclass
class Deps:
    customer_id: str


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: an invented code, then (after a retry prompt) a legal one, then its answer."""
    turn = sum(isinstance(message, ModelResponse) for message in messages)
    if turn < 2:
        code = INVENTED if turn == 0 else CORRECTED
        # Raw JSON text, as a provider returns it: the gate sends the gateway exactly this.
        arguments = f'{{"order_id": "{ORDER}", "reason_code": "{code}"}}'
        return ModelResponse(parts=[ToolCallPart("refund_order", arguments, tool_call_id=f"call_{turn + 1}")])
    return ModelResponse(parts=[TextPart("Refunded.")])


async def test_an_invented_code_is_refused_the_model_repairs_it_and_the_tool_runs_once(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    running = owned_gateway
    runs: list[dict[str, object]] = []
    toolset: FunctionToolset[Deps] = FunctionToolset()

    @toolset.tool
    def refund_order(ctx: RunContext[Deps], order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append({"order_id": order_id, "reason_code": reason_code})
        return f"refunded {order_id} ({reason_code})"

    async with Gateway(running.target) as gateway:
        gated = ArgwatchToolset(toolset, gateway=gateway, session=lambda ctx: Session(customer_id=ctx.deps.customer_id))
        agent = Agent(FunctionModel(script, model_name="gpt-4.1-mini"), deps_type=Deps, toolsets=[gated])
        result = await agent.run("refund my order", deps=Deps(CUSTOMER), conversation_id="thread-42")

    assert result.output == "Refunded."
    replies = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    # pydantic-ai's retry: the model reads the repair message as the refused call's result, marked retried.
    assert [(reply.tool_call_id, reply.outcome) for reply in replies] == [("call_1", "retried"), ("call_2", "success")]
    assert replies[0].retry is not None and replies[0].retry.cause == "model_retry"
    assert_repair_message(str(replies[0].content))
    assert_refused_then_repaired(running, caplog, conversation_id="thread-42", model="gpt-4.1-mini", runs=runs)
