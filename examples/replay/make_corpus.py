"""Writes examples/replay/corpus.jsonl: a small recorded corpus of known composition, in every shape replay reads.

    python examples/replay/make_corpus.py      # deterministic: the same file every time

200 tool calls (refund_order 100, create_ticket 60, transfer_stock 40), each in one
of the providers' shapes in turn (OpenAI Chat Completions and Responses, Anthropic
Messages, MCP tools/call, plain), plus 3 lines replay cannot read. The values:
mostly legal, with case and separator slips, retired values and inventions.
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REFUND_CODES = (
    ["DAMAGED_ITEM"] * 60
    + ["NOT_RECEIVED"] * 16
    + ["damaged item"] * 6
    + ["BROKEN"] * 4
    + ["ITEM_DEFECTIVE"] * 10
    + ["CUSTOMER_REQUEST"] * 4
)
COMPONENTS = ["billing-api"] * 40 + ["Checkout_Web"] * 6 + ["search-v1"] * 4 + ["frontend"] * 10
WAREHOUSES = ["AMS-1"] * 30 + ["ams 2"] * 4 + ["LHR-2"] * 2 + ["main"] * 4
MODELS = ("gpt-4.1-mini", "claude-sonnet-4-5")


def calls() -> list[tuple[str, dict[str, object]]]:
    found: list[tuple[str, dict[str, object]]] = []
    found += [
        ("refund_order", {"order_id": f"ord_{i:010d}", "reason_code": code}) for i, code in enumerate(REFUND_CODES)
    ]
    found += [("create_ticket", {"component_id": component, "title": "Checkout fails"}) for component in COMPONENTS]
    found += [("transfer_stock", {"warehouse_code": code, "sku": "SKU-1", "quantity": 3}) for code in WAREHOUSES]
    return found


def line(index: int, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    text = json.dumps(arguments)
    model = MODELS[index % 2]
    match index % 5:
        case 0:  # an OpenAI Chat Completions API response
            call = {"id": f"call_{index}", "type": "function", "function": {"name": tool, "arguments": text}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {"object": "chat.completion", "model": model, "choices": [{"index": 0, "message": message}]}
        case 1:  # an OpenAI Responses API response
            item = {"type": "function_call", "call_id": f"call_{index}", "name": tool, "arguments": text}
            return {"object": "response", "model": model, "output": [item]}
        case 2:  # an Anthropic Message
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": tool, "input": arguments}
            return {"type": "message", "role": "assistant", "model": model, "content": [block]}
        case 3:  # an MCP tools/call request
            return {
                "jsonrpc": "2.0",
                "id": index,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        case _:  # plain
            return {"tool": tool, "arguments": arguments, "model": model}


def main() -> None:
    lines = [json.dumps(line(index, tool, arguments)) for index, (tool, arguments) in enumerate(calls())]
    lines += ["{truncated", '{"event": "session_start"}', "[]"]  # what a real log also holds
    with open(os.path.join(HERE, "corpus.jsonl"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
