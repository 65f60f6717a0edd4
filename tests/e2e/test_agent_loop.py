"""examples/agent_loop.py on a real gateway: the invented value is refused, the model repairs it, the tool runs once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REASON_CODES, GatewayFactory
from tests.service.helpers import run_program

LOOP = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


@pytest.mark.e2e
async def test_the_agent_loop_repairs_the_call_and_runs_the_tool_once(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    out = await run_program(sys.executable, str(LOOP), "--target", gateway.target)
    steps = [json.loads(line) for line in out.splitlines()]
    assert [step["ran"] for step in steps] == [False, True]
    assert "ITEM_DEFECTIVE" in steps[0]["tool_error"] and "Nothing was executed" in steps[0]["tool_error"]
    assert steps[1]["result"]["reason_code"] in REASON_CODES
