"""An agent loop that checks every tool call at argwatch before running it, with argwatch.client.

The model here is scripted, so the loop runs without one: its first call of
refund_order carries a reason code the refunds service never defined; after
that it reads the tool error the gateway wrote and copies a valid value from
it, as a real model is asked to. With a real model, replace ScriptedModel with
your provider's client: the loop itself does not change.

    python examples/agent_loop.py --target 127.0.0.1:50051      # a gateway on the demo policy (make run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from argwatch.client import Gateway, from_openai

MAX_TURNS = 4


class ScriptedModel:
    """Stands in for an OpenAI-style chat model: answers with tool calls in Chat Completions' shape."""

    def __init__(self) -> None:
        self.turn = 0

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.turn += 1
        reason = "ITEM_DEFECTIVE"  # invented: it sounds right, and the service has no such code
        last = messages[-1]
        if last["role"] == "tool":
            # 'Valid values (4): "A", "B".' or 'The 5 closest of 20 valid values: "A", ...'
            listed = re.search(r'alid values(?: \(\d+\))?: ("[^\n]*)', last["content"])
            if listed:
                reason = re.findall(r'"([^"]+)"', listed.group(1))[0]  # copied exactly, as the message asks
        arguments = {"order_id": "ord_0012345678", "reason_code": reason, "amount_cents": 1200}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_turn{self.turn}",
                    "type": "function",
                    "function": {"name": "refund_order", "arguments": json.dumps(arguments)},
                }
            ],
        }


def refund_order(arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool itself (here a stand-in for the refunds service): only ever reached with checked arguments."""
    return {"refunded": True, "order_id": arguments["order_id"], "reason_code": arguments["reason_code"]}


async def run(target: str, conversation_id: str) -> list[dict[str, Any]]:
    """The loop: model -> argwatch -> the tool, or the gateway's error back to the model. Returns what happened."""
    model = ScriptedModel()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "My order ord_0012345678 arrived broken."}]
    happened: list[dict[str, Any]] = []
    async with Gateway(target) as gateway:
        for _ in range(MAX_TURNS):
            message = model.reply(messages)
            messages.append(message)
            for tool_call in message["tool_calls"]:
                call = from_openai(tool_call)
                outcome = await gateway.check(call, conversation_id=conversation_id, customer_id="cus_000123")
                if outcome.go_ahead:
                    result = refund_order(json.loads(call.arguments_json))
                    messages.append({"role": "tool", "tool_call_id": call.call_id, "content": json.dumps(result)})
                    happened.append({"call_id": call.call_id, "ran": True, "result": result})
                    return happened
                messages.append(call.tool_error(outcome.tool_error))
                happened.append({"call_id": call.call_id, "ran": False, "tool_error": outcome.tool_error})
    return happened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--conversation", default="agent-loop-demo")
    args = parser.parse_args()
    for step in asyncio.run(run(args.target, args.conversation)):
        print(json.dumps(step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
