"""argwatch in an MCP client (examples/mcp): a refused call never reaches the MCP server; an allowed one does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import GatewayFactory
from tests.frameworks.expectations import assert_refused_then_repaired, assert_repair_message, capture_samples
from tests.service.helpers import run_program

CLIENT = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "gated_client.py"


@pytest.mark.e2e
async def test_a_refused_call_is_answered_in_the_client_and_never_reaches_the_server(
    gateway_factory: GatewayFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    gateway = await gateway_factory(refund_mode="reject")
    server_log = tmp_path / "executed.jsonl"
    out = await run_program(
        sys.executable,
        str(CLIENT),
        "--target",
        gateway.target,
        env={**os.environ, "REFUNDS_SERVER_LOG": str(server_log)},
    )
    invented, legal = (json.loads(line) for line in out.splitlines())
    assert invented["is_error"] is True
    assert "ITEM_DEFECTIVE" in invented["text"] and "Nothing was executed" in invented["text"]
    assert legal == {"reason_code": "DAMAGED_ITEM", "is_error": False, "text": "refunded ord_0012345678 (DAMAGED_ITEM)"}
    executed = [json.loads(line) for line in server_log.read_text().splitlines()]
    assert [call["reason_code"] for call in executed] == ["DAMAGED_ITEM"]  # the refused call never left the client
    assert_repair_message(invented["text"])
    assert_refused_then_repaired(
        gateway,
        caplog,
        conversation_id="mcp-demo",
        model="scripted",
        reported=None,  # the example policy's refund_order declares no side effect
        runs=[{"order_id": call["order_id"], "reason_code": call["reason_code"]} for call in executed],
    )
