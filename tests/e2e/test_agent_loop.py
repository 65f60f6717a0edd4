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


@pytest.mark.e2e
async def test_a_refund_that_timed_out_is_not_run_twice(tmp_path: Path) -> None:
    """The refund goes through but its answer is lost; the model calls it again. The gateway refuses the
    repeat and names the status tool; the model checks, and stops. The refunds service ran it once."""
    from tests.conftest import gateway_on
    from tests.service.test_side_effects import POLICY

    gateway = await gateway_on(tmp_path, POLICY)
    try:
        out = await run_program(sys.executable, str(LOOP), "--target", gateway.target, "--refund-times-out")
    finally:
        await gateway.stop(0)
    timed_out, refused, status, answer = [json.loads(line) for line in out.splitlines()]
    assert timed_out["ran"] and timed_out["timed_out"]
    assert not refused["ran"] and "was not executed" in refused["tool_error"]
    assert "Its outcome was reported unknown" in refused["tool_error"]
    assert "call get_refund_status first" in refused["tool_error"]
    assert status["ran"] and status["result"] == {"status": "refunded", "refunded": True}
    assert answer == {"answer": "Your refund for ord_000001 has gone through.", "refunds_executed": 1}
