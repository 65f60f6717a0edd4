"""Tool calls as OpenAI, Anthropic and MCP clients represent them: what to check, and the error to hand back.

Each adapter takes the provider SDK's own object (openai's ChatCompletionMessageToolCall and
ResponseFunctionToolCall, anthropic's ToolUseBlock, the MCP SDK's JSONRPCRequest) or the same
thing as a plain dict (parsed JSON, or `model_dump()`): a field is read as an attribute or a key,
so no SDK has to be installed for the adapters to work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar

from argwatch.client._errors import InvalidInput


# What each adapter reads, as Protocols: the SDKs' objects match them as they are (no SDK is imported
# here), and so does anything else with those fields; a plain dict is taken as the Mapping beside them.
class OpenAIFunction(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class OpenAIToolCall(Protocol):
    """openai's ChatCompletionMessageFunctionToolCall (Chat Completions)."""

    @property
    def id(self) -> str: ...
    @property
    def function(self) -> OpenAIFunction: ...


class OpenAIFunctionCallItem(Protocol):
    """openai's ResponseFunctionToolCall (a Responses API output item)."""

    @property
    def call_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class AnthropicToolUse(Protocol):
    """anthropic's ToolUseBlock (a Messages API content block)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def input(self) -> object: ...


class MCPRequest(Protocol):
    """The MCP SDK's JSONRPCRequest (a tools/call request)."""

    @property
    def id(self) -> str | int: ...
    @property
    def method(self) -> str: ...
    @property
    def params(self) -> Mapping[str, Any] | None: ...


JSONObject = Mapping[str, Any]


# What each adapter's tool_error returns: the tool result that hands the message back, in its provider's shape.
class OpenAIToolMessage(TypedDict):
    """A Chat Completions tool message: {"role": "tool", "tool_call_id", "content"}."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


class OpenAIFunctionCallOutput(TypedDict):
    """A Responses API input item: {"type": "function_call_output", "call_id", "output"}."""

    type: Literal["function_call_output"]
    call_id: str
    output: str


class AnthropicToolResult(TypedDict):
    """A Messages API content block: {"type": "tool_result", "tool_use_id", "content", "is_error": True}."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: bool


class MCPTextContent(TypedDict):
    type: Literal["text"]
    text: str


class MCPToolResult(TypedDict):
    content: list[MCPTextContent]
    isError: bool


class MCPToolError(TypedDict):
    """A JSON-RPC response to tools/call whose result is the tool's error (isError), not a protocol error."""

    jsonrpc: Literal["2.0"]
    id: str | int
    result: MCPToolResult


E = TypeVar("E", covariant=True)  # the provider's shape of a tool result


@dataclass(frozen=True, slots=True)
class ProviderToolCall(Generic[E]):
    """One tool call the model made, and how to answer it in its provider's shape.

    Attributes:
        tool: The tool's name.
        arguments_json: The arguments as the model wrote them: the raw JSON text where the provider gives
            text (OpenAI), so the gateway sees exactly what the model emitted, malformed or not.
        call_id: The provider's id for this call (tool_call_id, tool_use_id, JSON-RPC id).
    """

    tool: str
    arguments_json: bytes
    call_id: str
    _error: Callable[[str], E]

    def tool_error(self, message: str) -> E:
        """The tool result that hands `message` (Repair's) back to the model, in the provider's shape.

        Args:
            message: What the model should read: `Outcome.tool_error`.
        """
        return self._error(message)


def from_openai(tool_call: OpenAIToolCall | JSONObject) -> ProviderToolCall[OpenAIToolMessage]:
    """A Chat Completions tool call: {"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}.

    Args:
        tool_call: openai's ChatCompletionMessageFunctionToolCall, or the same as a dict.

    Raises:
        InvalidInput: It has no function, or names no tool.
    """
    function = _object(_field(tool_call, "function"), "function")
    call_id = str(_field(tool_call, "id", ""))
    return ProviderToolCall(
        _name(_field(function, "name")),
        _text(_field(function, "arguments", "")),
        call_id,
        lambda message: {"role": "tool", "tool_call_id": call_id, "content": message},
    )


def from_openai_responses(item: OpenAIFunctionCallItem | JSONObject) -> ProviderToolCall[OpenAIFunctionCallOutput]:
    """A Responses API output item: {"type": "function_call", "call_id", "name", "arguments": "<JSON text>"}.

    Args:
        item: openai's ResponseFunctionToolCall, or the same as a dict.

    Raises:
        InvalidInput: It names no tool.
    """
    call_id = str(_field(item, "call_id", ""))
    return ProviderToolCall(
        _name(_field(item, "name")),
        _text(_field(item, "arguments", "")),
        call_id,
        lambda message: {"type": "function_call_output", "call_id": call_id, "output": message},
    )


def from_anthropic(block: AnthropicToolUse | JSONObject) -> ProviderToolCall[AnthropicToolResult]:
    """A Messages API content block: {"type": "tool_use", "id", "name", "input": {...}}.

    Args:
        block: anthropic's ToolUseBlock, or the same as a dict.

    Raises:
        InvalidInput: It names no tool.
    """
    call_id = str(_field(block, "id", ""))
    return ProviderToolCall(
        _name(_field(block, "name")),
        json.dumps(_field(block, "input", {})).encode(),
        call_id,
        lambda message: {"type": "tool_result", "tool_use_id": call_id, "content": message, "is_error": True},
    )


def from_mcp(request: MCPRequest | JSONObject) -> ProviderToolCall[MCPToolError]:
    """An MCP tools/call request: {"jsonrpc": "2.0", "id", "method": "tools/call", "params": {"name", "arguments"}}.

    Args:
        request: The MCP SDK's JSONRPCRequest, or the same as a dict.

    Raises:
        InvalidInput: It is not a tools/call request, has no params, or names no tool.
    """
    method = _field(request, "method")
    if method != "tools/call":
        raise InvalidInput(f"not an MCP tools/call request: method {method!r}")
    params = _object(_field(request, "params"), "params")
    request_id = _field(request, "id")
    return ProviderToolCall(
        _name(_field(params, "name")),
        json.dumps(_field(params, "arguments", {})).encode(),
        str(request_id),
        # The tool's error as a result the client passes to the model (isError), not a protocol error.
        lambda message: {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": message}], "isError": True},
        },
    )


def _field(value: object, name: str, default: Any = None) -> Any:
    """A field of a dict (parsed JSON) or of an SDK's object (a pydantic model, a dataclass)."""
    if isinstance(value, Mapping):
        return value.get(name, default)
    return getattr(value, name, default)


def _object(value: object, what: str) -> object:
    if value is None or isinstance(value, str | int | float | bool | list | tuple):
        raise InvalidInput(f"the tool call has no {what} object")
    return value


def _name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput("the tool call names no tool")
    return value


def _text(value: object) -> bytes:
    # OpenAI sends the arguments as text; anything else is passed on as JSON for the gateway to judge.
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()
