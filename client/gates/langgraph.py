"""The LangGraph gate: a ToolNode tool-call wrapper that checks each call of a LangChain tool at the gateway.

    from argwatch.client.gates.langgraph import argwatch_tool_calls
    tools = ToolNode([refund_order], awrap_tool_call=argwatch_tool_calls(gateway, customer_id="cus_7"))

A call the gateway refuses never runs: the ToolNode answers it with a
ToolMessage (status "error") holding the repair message, which the model reads
on its next turn, so its corrected call is checked and runs. The conversation
id is the run's `thread_id` (`config["configurable"]`); the model name comes
from the AIMessage that made the call (`response_metadata`, as the chat model
integrations fill it). Each value may be given instead: a string, or a function
of the tool's `ToolRuntime` (for the customer, say, `lambda runtime:
runtime.context.customer_id`). The wrapper is async (`ainvoke`, `astream`); an
unreachable gateway raises: the call is neither run nor let through unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
from langgraph.types import Command

from argwatch.client._adapters import ProviderToolCall, from_openai
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import CallFor, Given, run_allowed

Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]]


def argwatch_tool_calls(
    gateway: Gateway,
    *,
    conversation_id: Given[ToolRuntime] = None,
    customer_id: Given[ToolRuntime] = None,
    tenant: Given[ToolRuntime] = None,
    model: Given[ToolRuntime] = None,
) -> Wrapper:
    """A wrapper for `ToolNode(..., awrap_tool_call=...)`."""
    call_for: CallFor[ToolRuntime] = CallFor(conversation_id, customer_id, tenant, model)

    async def argwatch(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        tool_call, runtime = request.tool_call, request.runtime
        call = _as_provider_call(tool_call)
        found = call_for.resolve(runtime, conversation_id=_thread(runtime), model=_model_name(runtime, call.call_id))
        outcome = await gateway.check(call, **found)
        if not outcome.go_ahead:
            return ToolMessage(content=outcome.tool_error, tool_call_id=call.call_id, name=call.tool, status="error")
        return await run_allowed(gateway, outcome, lambda: execute(request))

    return argwatch


def _as_provider_call(tool_call: Any) -> ProviderToolCall:
    """LangChain's parsed tool call ({"name", "args", "id"}) in the Chat Completions shape the adapters read."""
    arguments = tool_call.get("args", {})
    return from_openai(
        {
            "id": tool_call.get("id") or "",
            "function": {"name": tool_call.get("name"), "arguments": json.dumps(arguments)},
        }
    )


def _thread(runtime: ToolRuntime) -> str:
    configurable = (runtime.config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    return str(thread) if thread is not None else ""


def _model_name(runtime: ToolRuntime, call_id: str) -> str:
    """The model named in the metadata of the AIMessage that made `call_id` (newest first)."""
    state = runtime.state
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(call.get("id") == call_id for call in message.tool_calls):
            metadata = message.response_metadata or {}
            name = metadata.get("model_name") or metadata.get("model")
            return name if isinstance(name, str) else ""
    return ""
