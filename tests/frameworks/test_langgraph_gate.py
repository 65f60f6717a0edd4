"""The LangGraph gate: LangGraph's own ToolNode and LangChain's scripted chat model, against a real gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from argwatch.client import Gateway, GatewayUnavailable, Session
from argwatch.client.gates.langgraph import gated_tool_node
from argwatch.server.process.app import RunningGateway
from tests.frameworks.expectations import (
    CORRECTED,
    CUSTOMER,
    INVENTED,
    ORDER,
    assert_refused_then_repaired,
    assert_repair_message,
    capture_samples,
    sampled,
)
from tests.service.helpers import value


def scripted(*codes: str) -> Iterator[AIMessage]:
    """What the model says, turn by turn, as a chat model integration returns it (model name included)."""
    for index, code in enumerate(codes, start=1):
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "refund_order", "args": {"order_id": ORDER, "reason_code": code}, "id": f"call_{index}"}
            ],
            response_metadata={"model_name": "gpt-4.1-mini"},
        )
    yield AIMessage(content="Refunded.", response_metadata={"model_name": "gpt-4.1-mini"})


def agent_graph(model: GenericFakeChatModel, tools: ToolNode) -> CompiledStateGraph[Any, Any, Any, Any]:
    """model -> tools -> model ..., until the model answers without a tool call (sync and async)."""

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def call_model_sync(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", RunnableLambda(call_model_sync, afunc=call_model))
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def refunds(runs: list[dict[str, object]], *, fail: bool = False) -> BaseTool:
    @tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append({"order_id": order_id, "reason_code": reason_code})
        if fail:
            raise RuntimeError("the refunds service timed out")
        return f"refunded {order_id} ({reason_code})"

    return refund_order


async def test_an_invented_code_is_refused_the_model_repairs_it_and_the_tool_runs_once(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    runs: list[dict[str, object]] = []
    async with Gateway(owned_gateway.target) as gateway:
        tools = gated_tool_node([refunds(runs)], gateway, session=Session(customer_id=CUSTOMER))  # the one line
        app = agent_graph(GenericFakeChatModel(messages=scripted(INVENTED, CORRECTED)), tools)
        final = await app.ainvoke(
            {"messages": [HumanMessage("refund my order")]}, {"configurable": {"thread_id": "thread-42"}}
        )

    messages = final["messages"]
    assert messages[-1].content == "Refunded."
    replies = [message for message in messages if isinstance(message, ToolMessage)]
    assert [(reply.tool_call_id, reply.status) for reply in replies] == [("call_1", "error"), ("call_2", "success")]
    assert_repair_message(str(replies[0].content))
    assert replies[1].content == f"refunded {ORDER} ({CORRECTED})"
    assert_refused_then_repaired(owned_gateway, caplog, conversation_id="thread-42", model="gpt-4.1-mini", runs=runs)


async def test_run_synchronously_the_node_raises_instead_of_running_the_tool_unchecked(
    owned_gateway: RunningGateway,
) -> None:
    runs: list[dict[str, object]] = []
    async with Gateway(owned_gateway.target) as gateway:
        app = agent_graph(GenericFakeChatModel(messages=scripted(INVENTED)), gated_tool_node([refunds(runs)], gateway))
        with pytest.raises(RuntimeError, match="run the graph with ainvoke or astream"):
            app.invoke({"messages": [HumanMessage("refund my order")]})
    assert runs == []


async def test_without_a_thread_id_the_conversation_is_its_first_message(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    async with Gateway(owned_gateway.target) as gateway:
        tools = gated_tool_node([refunds([])], gateway, session=Session(customer_id=CUSTOMER))
        app = agent_graph(GenericFakeChatModel(messages=scripted(INVENTED, CORRECTED)), tools)
        final = await app.ainvoke({"messages": [HumanMessage("refund my order")]})
    first = final["messages"][0]
    (offence,) = sampled(caplog)
    assert offence["conversation_id"] == f"messages-{first.id}"
    assert value(owned_gateway.registry, "tool_argument_repair_succeeded_total", tool="refund_order") == 1


async def test_a_tool_that_raised_is_reported_unknown_not_succeeded(owned_gateway: RunningGateway) -> None:
    runs: list[dict[str, object]] = []
    async with Gateway(owned_gateway.target) as gateway:
        # handle_tool_errors: the ToolNode answers the model with the error instead of raising.
        tools = gated_tool_node(
            [refunds(runs, fail=True)], gateway, session=Session(customer_id=CUSTOMER), handle_tool_errors=True
        )
        app = agent_graph(GenericFakeChatModel(messages=scripted(CORRECTED)), tools)
        await app.ainvoke({"messages": [HumanMessage("refund")]}, {"configurable": {"thread_id": "t"}})
    assert len(runs) == 1
    registry = owned_gateway.registry
    assert value(registry, "argwatch_outcome_reports_total", tool="refund_order", outcome="unknown") == 1
    assert value(registry, "argwatch_outcome_reports_total", tool="refund_order", outcome="succeeded") == 0


async def test_an_unreachable_gateway_raises_and_the_tool_does_not_run() -> None:
    runs: list[dict[str, object]] = []
    async with Gateway("127.0.0.1:1", timeout=0.5) as gateway:  # nothing listens on port 1
        app = agent_graph(GenericFakeChatModel(messages=scripted(CORRECTED)), gated_tool_node([refunds(runs)], gateway))
        with pytest.raises(GatewayUnavailable) as raised:
            await app.ainvoke({"messages": [HumanMessage("refund")]}, {"configurable": {"thread_id": "t"}})
    assert runs == []
    assert "127.0.0.1" not in str(raised.value)  # what a framework may hand the model names no address
