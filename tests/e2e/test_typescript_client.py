"""The TypeScript client (examples/typescript: Node.js, @grpc/grpc-js, the same .proto files) against a real gateway."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REASON_CODES, GatewayFactory
from tests.service.helpers import run_program

CLIENT = Path(__file__).resolve().parents[2] / "examples" / "typescript"
CHECK = CLIENT / "dist" / "check.js"


async def run_client(target: str, *mode: str) -> dict[str, object]:
    node = shutil.which("node")
    assert node is not None, "Node.js is missing: `make test` installs it (Debian's nodejs) with the npm packages"
    assert CHECK.exists(), f"{CHECK} is not built: `make test` runs npm ci and npm run build in {CLIENT}"
    out = await run_program(node, str(CHECK), target, *mode)
    steps = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {step["step"]: step["value"] for step in steps}


@pytest.mark.e2e
async def test_the_typescript_client_gets_the_verdicts_and_the_repair(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    seen = await run_client(gateway.target)

    clean = seen["validate_clean"]
    assert isinstance(clean, dict)
    assert (clean["decision"], clean["problems"]) == ("DECISION_ALLOW", 0)
    assert clean["call_id"]  # minted by the gateway when the caller gives none

    invented = seen["validate_invented"]
    assert invented == {
        "decision": "DECISION_REJECT",
        "call_id": "ts-invented-1",
        "problems": [{"code": "PROBLEM_CODE_OUT_OF_SET", "argument": "reason_code", "shape": "SHAPE_INVENTED"}],
    }

    advice = seen["repair"]
    assert advice["executed"] is False  # type: ignore[index]
    assert "ITEM_DEFECTIVE" in advice["message"]  # type: ignore[index]
    assert sorted(advice["legal"][0]) == sorted(REASON_CODES)  # type: ignore[index]

    assert seen["validate_stream"] == {
        "s1": {"decision": "DECISION_ALLOW", "problems": []},
        "s2": {
            "decision": "DECISION_REJECT",
            "problems": ["PROBLEM_CODE_OUT_OF_SET"],
        },  # a slip, refused in reject mode
        # A tool the policy does not know is judged in default_mode (observe here): reported, let through.
        "s3": {"decision": "DECISION_ALLOW", "problems": ["PROBLEM_CODE_UNKNOWN_TOOL"]},
    }

    gated = seen["gate"]
    assert gated["run"] is False and "LOST" in gated["toolResult"]  # type: ignore[index]


@pytest.mark.e2e
async def test_the_typescript_client_gets_the_key_a_refused_repeat_and_reports_an_outcome(tmp_path: Path) -> None:
    from tests.conftest import gateway_on
    from tests.service.test_side_effects import POLICY

    gateway = await gateway_on(tmp_path, POLICY)
    try:
        seen = await run_client(gateway.target, "side-effects")
    finally:
        await gateway.stop(0)
    first, repeat = seen["first"], seen["repeat"]
    assert isinstance(first, dict) and isinstance(repeat, dict)
    assert first["decision"] == "DECISION_ALLOW" and first["check"] == "REPEAT_CHECK_SHARED"
    assert str(first["key"]).startswith("aw1_")
    assert (repeat["decision"], repeat["key"], repeat["earlier"], repeat["problems"]) == (
        "DECISION_REJECT",
        first["key"],
        "ts-refund-1",
        ["PROBLEM_CODE_REPEATED_CALL"],
    )
    assert "call get_refund_status first" in str(repeat["message"])
    assert seen["reported"] == {"outcome": "OUTCOME_FAILED", "key": first["key"]}
    assert seen["retry"] == {"decision": "DECISION_ALLOW", "retry_allowed": True}
