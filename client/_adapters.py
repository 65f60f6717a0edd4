"""Tool calls as OpenAI, Anthropic and MCP clients represent them: what to check, and the error to hand back."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ProviderToolCall:
    """One tool call the model made, and how to answer it in its provider's shape."""

    tool: str
    # The arguments as the model wrote them: the raw JSON text where the provider gives text
    # (OpenAI), so the gateway sees exactly what the model emitted, malformed or not.
    arguments_json: bytes
    call_id: str  # the provider's id for this call (tool_call_id, tool_use_id, JSON-RPC id)
    _error: Callable[[str], dict[str, Any]]

    def tool_error(self, message: str) -> dict[str, Any]:
        """The tool result that hands `message` (Repair's) back to the model, in the provider's shape."""
        return self._error(message)


def from_openai(tool_call: Mapping[str, Any]) -> ProviderToolCall:
    """A Chat Completions tool call: {"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}."""
    function = _mapping(tool_call.get("function"), "function")
    call_id = str(tool_call.get("id", ""))
    return ProviderToolCall(
        _name(function.get("name")),
        _text(function.get("arguments", "")),
        call_id,
        lambda message: {"role": "tool", "tool_call_id": call_id, "content": message},
    )


def from_openai_responses(item: Mapping[str, Any]) -> ProviderToolCall:
    """A Responses API output item: {"type": "function_call", "call_id", "name", "arguments": "<JSON text>"}."""
    call_id = str(item.get("call_id", ""))
    return ProviderToolCall(
        _name(item.get("name")),
        _text(item.get("arguments", "")),
        call_id,
        lambda message: {"type": "function_call_output", "call_id": call_id, "output": message},
    )


def from_anthropic(block: Mapping[str, Any]) -> ProviderToolCall:
    """A Messages API content block: {"type": "tool_use", "id", "name", "input": {...}}."""
    call_id = str(block.get("id", ""))
    return ProviderToolCall(
        _name(block.get("name")),
        json.dumps(block.get("input", {})).encode(),
        call_id,
        lambda message: {"type": "tool_result", "tool_use_id": call_id, "content": message, "is_error": True},
    )


def from_mcp(request: Mapping[str, Any]) -> ProviderToolCall:
    """An MCP tools/call request: {"jsonrpc": "2.0", "id", "method": "tools/call", "params": {"name", "arguments"}}."""
    if request.get("method") != "tools/call":
        raise ValueError(f"not an MCP tools/call request: method {request.get('method')!r}")
    params = _mapping(request.get("params"), "params")
    request_id = request.get("id")
    return ProviderToolCall(
        _name(params.get("name")),
        json.dumps(params.get("arguments", {})).encode(),
        str(request_id),
        # The tool's error as a result the client passes to the model (isError), not a protocol error.
        lambda message: {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": message}], "isError": True},
        },
    )


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"the tool call has no {what} object")
    return value


def _name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("the tool call names no tool")
    return value


def _text(value: object) -> bytes:
    # OpenAI sends the arguments as text; anything else is passed on as JSON for the gateway to judge.
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()
