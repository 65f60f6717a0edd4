"""The LangGraph gate: a ToolNode whose calls of LangChain tools are checked at the gateway first.

    from argwatch.client.gates.langgraph import gated_tool_node
    tools = gated_tool_node([refund_order], gateway, session=Session(customer_id="cus_7"))

A call the gateway refuses never runs: the ToolNode answers it with a
ToolMessage (status "error") holding the repair message, which the model reads
on its next turn, so its corrected call is checked and runs. The check is
async (`ainvoke`, `astream`): run synchronously (`invoke`), the node raises
rather than run tools unchecked, since a ToolNode with only an async wrapper
would run them unwrapped.

The conversation id is the run's `thread_id` (`config["configurable"]`), else
the id of the conversation's first message (LangGraph's message reducer gives
each one). The model name comes from the AIMessage that made the call
(`response_metadata`, as the chat model integrations fill it). A `Session`
given, or one from a function of the tool's `ToolRuntime` (the customer, say:
`lambda runtime: Session(customer_id=runtime.context.customer_id)`), takes
their place where it has its own. A gateway that gives no verdict raises
GatewayUnavailable: the call is neither run nor let through unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
from langgraph.types import Command

from argwatch.client._adapters import OpenAIToolMessage, ProviderToolCall, from_openai
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import GivenSession, check, run_allowed, session_for

Answer = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Awaitable[Answer]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[Answer]]


def gated_tool_node(
    tools: Sequence[Any],
    gateway: Gateway,
    *,
    session: GivenSession[ToolRuntime] = None,
    **tool_node_options: Any,
) -> ToolNode:
    """A ToolNode for `tools`, every call checked first.

    Args:
        tools: ToolNode's tools.
        gateway: The gateway that checks each call.
        session: Who and what each call is for, or a function of the tool's ToolRuntime that says so per
            call. The run's thread (else its first message) and the calling message's model fill what it leaves empty.
        **tool_node_options: ToolNode's own options (`handle_tool_errors`, ...).
    """
    gate = argwatch_tool_calls(gateway, session=session)
    return ToolNode(tools, awrap_tool_call=gate, wrap_tool_call=refuse_sync_calls, **tool_node_options)


def argwatch_tool_calls(gateway: Gateway, *, session: GivenSession[ToolRuntime] = None) -> Wrapper:
    """The wrapper alone, for `ToolNode(..., awrap_tool_call=..., wrap_tool_call=refuse_sync_calls)`.

    Args:
        gateway: The gateway that checks each call.
        session: As gated_tool_node's.
    """

    async def argwatch(request: ToolCallRequest, execute: Execute) -> Answer:
        runtime = request.runtime
        call = _as_provider_call(request.tool_call)
        found = session_for(
            session, runtime, conversation_id=_conversation(runtime), model=_model_name(runtime, call.call_id)
        )
        outcome = await check(gateway, call, found)
        if not outcome.go_ahead:
            return ToolMessage(content=outcome.tool_error, tool_call_id=call.call_id, name=call.tool, status="error")
        return await run_allowed(gateway, outcome, lambda: execute(request), failed=_an_error)

    return argwatch


def refuse_sync_calls(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Answer]) -> Answer:
    """ToolNode's synchronous path: the gate is async, and a tool must not run unchecked."""
    raise RuntimeError(
        f"argwatch: {request.tool_call.get('name')} was not run: the gate checks calls asynchronously; "
        "run the graph with ainvoke or astream"
    )


def _an_error(answer: Answer) -> bool:
    # A tool that raised, answered by the ToolNode (handle_tool_errors): whether it acted is unknown.
    return isinstance(answer, ToolMessage) and answer.status == "error"


def _as_provider_call(tool_call: Any) -> ProviderToolCall[OpenAIToolMessage]:
    """LangChain's parsed tool call ({"name", "args", "id"}) in the Chat Completions shape the adapters read."""
    arguments = tool_call.get("args", {})
    return from_openai(
        {
            "id": tool_call.get("id") or "",
            "function": {"name": tool_call.get("name"), "arguments": json.dumps(arguments)},
        }
    )


def _messages(runtime: ToolRuntime) -> list[Any]:
    state = runtime.state
    found = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    return found if isinstance(found, list) else []


def _conversation(runtime: ToolRuntime) -> str:
    configurable = (runtime.config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is not None:
        return str(thread)
    messages = _messages(runtime)
    first = messages[0] if messages else None
    return f"messages-{first.id}" if isinstance(first, BaseMessage) and first.id else ""


def _model_name(runtime: ToolRuntime, call_id: str) -> str:
    """The model named in the metadata of the AIMessage that made `call_id` (newest first)."""
    for message in reversed(_messages(runtime)):
        if isinstance(message, AIMessage) and any(call.get("id") == call_id for call in message.tool_calls):
            metadata = message.response_metadata or {}
            name = metadata.get("model_name") or metadata.get("model")
            return name if isinstance(name, str) else ""
    return ""
