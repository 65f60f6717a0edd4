"""examples/agent_loop.py on a real gateway: the invented value is refused, the model repairs it, the tool runs once."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REASON_CODES, GatewayFactory

LOOP = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


@pytest.mark.e2e
async def test_the_agent_loop_repairs_the_call_and_runs_the_tool_once(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(LOOP),
        "--target",
        gateway.target,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    steps = [json.loads(line) for line in out.decode().splitlines()]
    assert [step["ran"] for step in steps] == [False, True]
    assert "ITEM_DEFECTIVE" in steps[0]["tool_error"] and "Nothing was executed" in steps[0]["tool_error"]
    assert steps[1]["result"]["reason_code"] in REASON_CODES
