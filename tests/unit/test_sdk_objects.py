"""Issue 20 (part): the client's adapters take the provider SDKs' own objects, built offline from recorded
responses with each SDK's model_validate, and their tool errors are what each SDK's parameter types accept.

Before, each adapter was typed Mapping and called .get(): `from_openai` on a ChatCompletion's tool call
failed with "'ChatCompletionMessageFunctionToolCall' object has no attribute 'get'", and so on for each.
"""

from __future__ import annotations

from anthropic.types import Message, ToolResultBlockParam
from mcp.types import JSONRPCRequest, JSONRPCResponse
from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam
from openai.types.responses import Response
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from argwatch.client import from_anthropic, from_mcp, from_openai, from_openai_responses

INVENTED = '{"reason_code": "GOODWILL", "order_id": "ord_000001"}'

CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1764460800, "model": "gpt-4.1",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "refusal": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "refund_order", "arguments": INVENTED}},
            {"id": "call_2", "type": "function", "function": {"name": "get_refund_status", "arguments": "{}"}},
        ]}}],
}  # fmt: skip
RESPONSES = {
    "id": "resp_1", "object": "response", "created_at": 1764460800, "model": "gpt-4.1", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "refund_order",
                "arguments": INVENTED, "status": "completed"}],
}  # fmt: skip
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
    "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 20},
    "content": [{"type": "text", "text": "Refunding."},
                {"type": "tool_use", "id": "toolu_1", "name": "refund_order",
                 "input": {"reason_code": "GOODWILL", "order_id": "ord_000001"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_refund_status", "input": {}}],
}  # fmt: skip
MCP_CALL = {
    "jsonrpc": "2.0", "id": 7, "method": "tools/call",
    "params": {"name": "refund_order", "arguments": {"reason_code": "GOODWILL", "order_id": "ord_000001"}},
}  # fmt: skip


def test_openai_chat_completions_tool_calls_as_the_sdk_gives_them() -> None:
    message = ChatCompletion.model_validate(CHAT).choices[0].message
    assert message.tool_calls is not None
    # The loop of docs/calling.md, as written: the type check is what narrows the SDK's union (a custom
    # tool call has no function) to what from_openai's Protocol takes, for mypy as for the reader.
    calls = [from_openai(tool_call) for tool_call in message.tool_calls if tool_call.type == "function"]
    assert [(c.tool, c.call_id) for c in calls] == [("refund_order", "call_1"), ("get_refund_status", "call_2")]
    assert calls[0].arguments_json == INVENTED.encode()  # the model's text, byte for byte
    error = calls[0].tool_error("reason_code: GOODWILL is not a reason code")
    TypeAdapter(ChatCompletionToolMessageParam).validate_python(error)


def test_openai_responses_function_calls() -> None:
    (item,) = Response.model_validate(RESPONSES).output
    assert item.type == "function_call"
    call = from_openai_responses(item)
    assert (call.tool, call.call_id, call.arguments_json) == ("refund_order", "call_9", INVENTED.encode())
    TypeAdapter(FunctionCallOutput).validate_python(call.tool_error("no"))


def test_anthropic_tool_use_blocks_of_a_whole_message() -> None:
    message = Message.model_validate(MESSAGE)
    calls = [from_anthropic(block) for block in message.content if block.type == "tool_use"]
    assert [(c.tool, c.call_id) for c in calls] == [("refund_order", "toolu_1"), ("get_refund_status", "toolu_2")]
    assert calls[0].arguments_json == b'{"reason_code": "GOODWILL", "order_id": "ord_000001"}'
    TypeAdapter(ToolResultBlockParam).validate_python(calls[0].tool_error("no"))


def test_an_mcp_sdk_tools_call_request() -> None:
    request = JSONRPCRequest.model_validate(MCP_CALL)
    call = from_mcp(request)
    assert (call.tool, call.call_id) == ("refund_order", "7")
    answer = JSONRPCResponse.model_validate(call.tool_error("no"))
    assert answer.result["isError"] is True
