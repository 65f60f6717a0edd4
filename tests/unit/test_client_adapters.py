"""argwatch.client's adapters on recorded tool-call shapes: what reaches the gateway, and the error handed back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from argwatch.client import from_anthropic, from_mcp, from_openai, from_openai_responses

DATA = Path(__file__).resolve().parents[1] / "data" / "tool_calls"


def recorded(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def test_openai_chat_keeps_the_models_text_as_it_is_even_when_it_is_not_json() -> None:
    calls = recorded("openai_chat.json")["choices"][0]["message"]["tool_calls"]
    first, cut_short = from_openai(calls[0]), from_openai(calls[1])
    assert (first.tool, first.call_id) == ("refund_order", "call_9pw1qnYScqvGrCH58HWCvFH6")
    assert json.loads(first.arguments_json) == {
        "order_id": "ord_0012345678",
        "reason_code": "ITEM_DEFECTIVE",
        "amount_cents": 1200,
    }
    # Truncated JSON goes to the gateway as written: it is a MALFORMED_ARGUMENTS problem there, not lost here.
    assert cut_short.arguments_json == b'{"reason_code": "DAMAGED_ITEM", '
    assert first.tool_error("no such code") == {
        "role": "tool",
        "tool_call_id": "call_9pw1qnYScqvGrCH58HWCvFH6",
        "content": "no such code",
    }


def test_openai_responses_function_call() -> None:
    call = from_openai_responses(recorded("openai_responses.json")["output"][0])
    assert (call.tool, call.call_id) == ("refund_order", "call_12345xyz")
    assert json.loads(call.arguments_json)["reason_code"] == "DAMAGED_ITEM"
    assert call.tool_error("try again") == {
        "type": "function_call_output",
        "call_id": "call_12345xyz",
        "output": "try again",
    }


def test_anthropic_tool_use_block() -> None:
    block = next(b for b in recorded("anthropic.json")["content"] if b["type"] == "tool_use")
    call = from_anthropic(block)
    assert (call.tool, call.call_id) == ("refund_order", "toolu_01A09q90qw90lq917835lq9")
    assert json.loads(call.arguments_json)["amount_cents"] == 1200
    assert call.tool_error("refused") == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "refused",
        "is_error": True,
    }


def test_mcp_tools_call_and_its_error_result() -> None:
    call = from_mcp(recorded("mcp.json"))
    assert (call.tool, call.call_id) == ("refund_order", "7")
    assert json.loads(call.arguments_json) == {"order_id": "ord_0012345678", "reason_code": "damaged item"}
    # A tool error is a result with isError, which the MCP client passes to the model; not a JSON-RPC error.
    assert call.tool_error("refused") == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": "refused"}], "isError": True},
    }


@pytest.mark.parametrize(
    ("adapter", "shape", "why"),
    [
        (from_openai, {"id": "c1", "type": "function"}, "no function"),
        (from_openai, {"id": "c1", "function": {"arguments": "{}"}}, "names no tool"),
        (from_anthropic, {"type": "tool_use", "id": "t1", "input": {}}, "names no tool"),
        (from_mcp, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "not an MCP tools/call"),
    ],
)
def test_a_shape_that_is_not_a_tool_call_is_refused_clearly(adapter: Any, shape: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        adapter(shape)
