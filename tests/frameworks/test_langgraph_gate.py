"""The LangGraph gate: LangGraph's own ToolNode and LangChain's scripted chat model, against a real gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from argwatch.client import Gateway
from argwatch.client.gates.langgraph import argwatch_tool_calls
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


def scripted() -> Iterator[AIMessage]:
    """What the model says, turn by turn, as a chat model integration returns it (model name included)."""
    for index, code in enumerate((INVENTED, CORRECTED), start=1):
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "refund_order", "args": {"order_id": ORDER, "reason_code": code}, "id": f"call_{index}"}
            ],
            response_metadata={"model_name": "gpt-4.1-mini"},
        )
    yield AIMessage(content="Refunded.", response_metadata={"model_name": "gpt-4.1-mini"})


async def test_an_invented_code_is_refused_the_model_repairs_it_and_the_tool_runs_once(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    running = owned_gateway
    runs: list[dict[str, object]] = []

    @tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append({"order_id": order_id, "reason_code": reason_code})
        return f"refunded {order_id} ({reason_code})"

    model = GenericFakeChatModel(messages=scripted())
    async with Gateway(running.target) as gateway:

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_node(
            "tools", ToolNode([refund_order], awrap_tool_call=argwatch_tool_calls(gateway, customer_id=CUSTOMER))
        )
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        app = graph.compile()
        final = await app.ainvoke(
            {"messages": [HumanMessage("refund my order")]}, {"configurable": {"thread_id": "thread-42"}}
        )

    messages = final["messages"]
    assert messages[-1].content == "Refunded."
    replies = [message for message in messages if isinstance(message, ToolMessage)]
    assert [(reply.tool_call_id, reply.status) for reply in replies] == [("call_1", "error"), ("call_2", "success")]
    assert_repair_message(str(replies[0].content))
    assert replies[1].content == f"refunded {ORDER} ({CORRECTED})"
    assert_refused_then_repaired(running, caplog, conversation_id="thread-42", model="gpt-4.1-mini", runs=runs)
