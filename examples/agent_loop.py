"""An agent loop that checks every tool call at argwatch before running it, with argwatch.client.

The model here is scripted, so the loop runs without one: its first call of
refund_order carries a reason code the refunds service never defined; after
that it reads the tool error the gateway wrote and copies a valid value from
it, as a real model is asked to. With a real model, replace ScriptedModel with
your provider's client: the loop itself does not change.

With --refund-times-out, the refund goes through but its answer is lost (a
timeout), the failure that refunds customers twice: the loop reports the
outcome as unknown, the model calls the refund again, the gateway refuses the
repeat and tells the model to check the refund's status first, and the model
does, and stops. The refund ran once.

    python examples/agent_loop.py --target 127.0.0.1:50051      # a gateway on the demo policy (make run)
    python examples/agent_loop.py --target 127.0.0.1:50051 --refund-times-out
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from argwatch.client import Gateway, Session, from_openai

MAX_TURNS = 6
ORDER = "ord_000001"  # in the demo owning service's records (examples/demo_data.py), paid 153.23
CUSTOMER = "cus_000"  # its owner


class ScriptedModel:
    """Stands in for an OpenAI-style chat model: answers with tool calls in Chat Completions' shape."""

    def __init__(self) -> None:
        self.turn = 0
        self.reason = "ITEM_DEFECTIVE"  # invented: it sounds right, and the service has no such code

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.turn += 1
        last = messages[-1]
        content = str(last.get("content") or "")
        if last["role"] == "tool":
            # 'Valid values (4): "A", "B".' or 'The 5 closest of 20 valid values: "A", ...'
            listed = re.search(r'alid values(?: \(\d+\))?: ("[^\n]*)', content)
            if listed:
                self.reason = re.findall(r'"([^"]+)"', listed.group(1))[0]  # copied exactly, as the message asks
            status = re.search(r"call (\w+) first", content)
            if status:  # the gateway refused a repeat: check before doing it again, as it says
                return self._call(status.group(1), {"order_id": ORDER})
            if '"refunded": true' in content and '"status"' in content:
                return {"role": "assistant", "content": f"Your refund for {ORDER} has gone through.", "tool_calls": []}
        arguments = {"order_id": ORDER, "reason_code": self.reason, "amount_cents": 1200}
        return self._call("refund_order", arguments)

    def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_turn{self.turn}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(arguments)},
                }
            ],
        }


class RefundsService:
    """The tools themselves (a stand-in for the refunds service): only ever reached with checked arguments.
    It keeps refunds by idempotency key, as a payments API does, and can lose its first answer."""

    def __init__(self, lose_first_answer: bool) -> None:
        self.refunds: dict[str, dict[str, Any]] = {}
        self.executed = 0
        self._lose_answer = lose_first_answer

    def refund_order(self, arguments: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        if idempotency_key and idempotency_key in self.refunds:
            return self.refunds[idempotency_key]  # a repeat that reached it anyway: the first result, not a refund
        self.executed += 1
        result = {"refunded": True, "order_id": arguments["order_id"], "reason_code": arguments["reason_code"]}
        self.refunds[idempotency_key] = result
        if self._lose_answer:
            self._lose_answer = False
            raise TimeoutError("the refunds service did not answer within 10 s")
        return result

    def get_refund_status(self, arguments: dict[str, Any]) -> dict[str, Any]:
        done = any(r["order_id"] == arguments.get("order_id") for r in self.refunds.values())
        return {"status": "refunded" if done else "none", "refunded": done}


async def run(target: str, conversation_id: str, refund_times_out: bool = False) -> list[dict[str, Any]]:
    """The loop: model -> argwatch -> the tool, or the gateway's error back to the model. Returns what happened."""
    model = ScriptedModel()
    service = RefundsService(lose_first_answer=refund_times_out)
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"My order {ORDER} arrived broken."}]
    happened: list[dict[str, Any]] = []
    session = Session(conversation_id=conversation_id, customer_id=CUSTOMER)
    async with Gateway(target) as gateway:
        for _ in range(MAX_TURNS):
            message = model.reply(messages)
            messages.append(message)
            if not message["tool_calls"]:
                happened.append({"answer": message["content"], "refunds_executed": service.executed})
                return happened
            for tool_call in message["tool_calls"]:
                call = from_openai(tool_call)
                outcome = await gateway.check(call, session)
                if not outcome.go_ahead:
                    messages.append(call.tool_error(outcome.tool_error))
                    happened.append({"call_id": call.call_id, "ran": False, "tool_error": outcome.tool_error})
                    continue
                arguments = json.loads(call.arguments_json)
                try:
                    if call.tool == "refund_order":
                        result = service.refund_order(arguments, outcome.idempotency_key)
                    else:
                        result = service.get_refund_status(arguments)
                except TimeoutError as error:
                    # Nobody knows whether it happened: say so to the gateway, and to the model.
                    await gateway.report_outcome(outcome, "unknown")
                    messages.append(call.tool_error(f"{call.tool} timed out: {error}"))
                    happened.append({"call_id": call.call_id, "ran": True, "timed_out": True})
                    continue
                if outcome.idempotency_key:
                    await gateway.report_outcome(outcome, "succeeded")
                messages.append({"role": "tool", "tool_call_id": call.call_id, "content": json.dumps(result)})
                happened.append({"call_id": call.call_id, "ran": True, "result": result})
                if call.tool == "refund_order":
                    return happened
    return happened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--conversation", default="agent-loop-demo")
    parser.add_argument("--refund-times-out", action="store_true", help="lose the refund's first answer")
    args = parser.parse_args()
    for step in asyncio.run(run(args.target, args.conversation, args.refund_times_out)):
        print(json.dumps(step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
