"""The TypeScript client's framework gates (examples/typescript): the Vercel AI SDK and the OpenAI Node SDK, offline.

The Vercel AI SDK's own generateText loop runs its own scripted model (ai/test's MockLanguageModelV3) with a
tool made by its tool() helper and gated in one line: the invented reason code is refused and the model is
handed the repair message, its corrected call goes ahead, and the tool runs once. The OpenAI SDK's objects
come from recorded responses, typed with the SDK's own types (tsc checks them when the client is built).
Each run is checked from the gateway's side too: the conversation id and the model in its sampled log,
and the repair in its Admin API figures.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from argwatch.server.telemetry.samples import SAMPLES_LOGGER
from argwatch.v1 import admin_pb2
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_status, run_program

CLIENT = Path(__file__).resolve().parents[2] / "examples" / "typescript"
CHECK = CLIENT / "dist" / "gates-check.js"
REFUND = {"refund_id": "rf_0001", "status": "refunded"}


async def run_gates(target: str, mode: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "Node.js is missing: `make test` installs it (Debian's nodejs) with the npm packages"
    assert CHECK.exists(), f"{CHECK} is not built: `make test` runs npm ci and npm run build in {CLIENT}"
    out = await run_program(node, str(CHECK), target, mode)
    steps = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {step["step"]: step["value"] for step in steps}


def sampled(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str, str]]:
    """The gateway's sampled log (rate 1.0 in the test policy): value, conversation id, call id and model."""
    records = [json.loads(r.getMessage()) for r in caplog.records if r.name == SAMPLES_LOGGER]
    return [(r["value"], r["conversation_id"], r["call_id"], r["model"]) for r in records]


def last_minute(status: admin_pb2.GetStatusResponse, tool: str) -> admin_pb2.WindowFigures:
    row = next(t for t in status.tools if t.tool == tool)
    return next(w for w in row.windows if w.window_seconds == 60)


@pytest.mark.e2e
async def test_the_ai_sdk_gate_refuses_the_invented_call_and_the_corrected_one_runs_once(
    gateway_factory: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    gateway = await gateway_factory(refund_mode="reject")
    seen = (await run_gates(gateway.target, "vercel-ai"))["vercel_ai"]

    # The tool's own execute ran once, on the corrected call only.
    corrected = {"order_id": "ord_0012345678", "reason_code": "DAMAGED_ITEM", "amount_cents": 1200}
    assert seen["ran"] == [{"input": corrected, "toolCallId": "call-corrected"}]
    # All three scripted steps ran: two tool calls, then the answer.
    assert (seen["model_calls"], seen["steps"]) == (3, ["tool-calls", "tool-calls", "stop"])
    assert seen["text"] == "The refund is on its way."

    # On its second step the model was handed the repair message as the invented call's result.
    first, second, third = seen["tool_results_seen_by_model"]
    assert first == []
    [refused] = second
    assert refused["toolCallId"] == "call-invented" and refused["output"]["type"] == "error-text"
    message = refused["output"]["value"]
    assert message.startswith("The call to refund_order was rejected by argument validation. Nothing was executed.")
    assert '"ITEM_DEFECTIVE" is not a valid value' in message and '"DAMAGED_ITEM"' in message
    # On its third, the corrected call's real result as well.
    assert third == [refused, {"toolCallId": "call-corrected", "output": {"type": "json", "value": REFUND}}]
    # The harness can tell the refusal from a result: an ArgwatchRefusal, first attempt, not given up.
    (refusal,) = seen["refusals"]
    # The gate checks each call under an id of its own, the AI SDK's in front: "call_1" in two conversations
    # must not be one rejection.
    refusal_id = refusal.pop("callId")
    assert refusal_id.startswith("call-invented~")
    assert refusal == {"toolCallId": "call-invented", "attempt": 1, "giveUp": False, "executed": False}
    assert seen["tool_results"] == [{"toolCallId": "call-corrected", "output": REFUND}]

    # The gateway got the conversation, the AI SDK's tool call id and the model's id with the call.
    ((value, conversation, call_id, model),) = sampled(caplog)
    assert (value, conversation, model) == ('"ITEM_DEFECTIVE"', "ts-vercel-1", "scripted-refunds-1")
    assert call_id == refusal_id
    # The corrected call closed the repair that the refusal opened.
    minute = last_minute(await admin_status(gateway), "refund_order")
    assert (minute.calls, minute.rejected, minute.repair_started, minute.repair_succeeded) == (2, 1, 1, 1)


@pytest.mark.e2e
async def test_the_openai_sdk_objects_go_through_the_gateway(
    gateway_factory: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    gateway = await gateway_factory(refund_mode="reject")
    seen = await run_gates(gateway.target, "openai")

    chat = seen["openai_chat"]
    # tsc built the check only if the adapters take and return exactly the SDK's types.
    assert chat["type_checks"] == [True, True, True, True]
    invented, legal = "call_Qm3XsV8dK1pT6yLwZr0Nc4Hb", "call_Wf7JbN2eR5uC9aGqXo1Ls8Dv"
    assert chat["decisions"] == [
        {"id": invented, "run": False, "call_id": invented},
        {"id": legal, "run": True, "call_id": legal},
    ]
    assert chat["ran"] == [legal]
    refusal, result = chat["messages"]
    assert (refusal["role"], refusal["tool_call_id"]) == ("tool", invented)
    assert "Nothing was executed" in refusal["content"] and '"ITEM_DEFECTIVE"' in refusal["content"]
    assert result == {"role": "tool", "tool_call_id": legal, "content": '{"status":"refunded"}'}

    [answer] = seen["openai_responses"]["input"]
    assert (answer["type"], answer["call_id"]) == ("function_call_output", "call_Hd4TqW9zP2mK7vBxYs5Rn1Ge")
    assert '"GOODWILL" is not a valid value' in answer["output"]

    # The model's name comes from the ChatCompletion itself; the Responses call passed its own.
    assert sampled(caplog) == [
        ('"ITEM_DEFECTIVE"', "ts-openai-1", invented, "gpt-4.1-mini-2025-04-14"),
        ('"GOODWILL"', "ts-openai-2", "call_Hd4TqW9zP2mK7vBxYs5Rn1Ge", "gpt-4.1-mini"),
    ]
    minute = last_minute(await admin_status(gateway), "refund_order")
    assert (minute.calls, minute.rejected, minute.repair_started, minute.repair_succeeded) == (3, 2, 2, 1)
