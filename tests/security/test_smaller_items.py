"""The second round's smaller findings: a crafted mode journal, a negative refund, a tool an override names.

- A crafted `--mode-state` journal stopped `argwatch serve` with a raw
  traceback; it now refuses to start with the file and the line named.
- The example policy let a negative refund through (`amount_cents: -1`, or
  -2^63); its schema now says `minimum: 1`.
- While a reloaded policy lacked a tool that carried a reject override (one a
  replica on another policy set), calls to that tool passed as UNKNOWN_TOOL
  under the default observe mode; the override now holds for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from argwatch.server.modes.store import ModeRefused, ModeStore
from argwatch.server.policy.loader import load_policy, parse_policy
from argwatch.server.policy.model import Mode
from argwatch.server.verdict.findings import ProblemCode
from argwatch.server.verdict.schema_checks import schema_problems
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, request

ROOT = Path(__file__).resolve().parents[2]
POLICY = "tools:\n  refund_order:\n    mode: observe\n    schema: {type: object}\n"
CHANGE = {
    "at": 1.0,
    "actor": "oncall",
    "target": "refund_order",
    "old": "observe",
    "new": "reject",
    "reason": "INC-1",
    "expires_at": None,
    "outcome": "applied",
}
OVERRIDE = {"mode": "reject", "actor": "oncall", "reason": "INC-1", "set_at": 1.0, "expires_at": None}


@pytest.mark.parametrize(
    ("bad_line", "named"),
    [
        ({"version": 2, "change": {**CHANGE, "at": "yesterday"}, "overrides": {}}, "at: expected a number"),
        ({"version": 2, "change": CHANGE, "overrides": {"refund_order": {**OVERRIDE, "mode": "boom"}}}, "mode"),
        ({"version": 2, "change": {"actor": "x"}, "overrides": {}}, "missing 'at'"),
        ([1, 2, 3], "expected a JSON object"),
        ({"version": "two", "snapshot": {"overrides": {}, "audit": []}}, "version: expected a whole number"),
    ],
)
def test_a_crafted_journal_line_is_refused_naming_the_file_and_line(
    tmp_path: Path, bad_line: object, named: str
) -> None:
    journal = tmp_path / "modes.json"
    good = {"version": 1, "change": CHANGE, "overrides": {"refund_order": OVERRIDE}}
    journal.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps(bad_line) + b"\n")
    policy = parse_policy(POLICY.encode(), str(tmp_path / "policy.yaml"))
    with pytest.raises(ModeRefused) as refused:
        ModeStore(policy, state_file=str(journal))
    assert f"{journal}, line 2: " in str(refused.value) and named in str(refused.value)


def test_serve_with_a_crafted_journal_says_so_in_one_line(tmp_path: Path) -> None:
    """No traceback: the error names the file and the line, and the exit code is not 0."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    journal = tmp_path / "modes.json"
    journal.write_bytes(orjson.dumps({"version": 1, "change": {**CHANGE, "reason": 7}, "overrides": {}}) + b"\n")
    argwatch = os.path.join(os.path.dirname(sys.executable), "argwatch")
    done = subprocess.run(
        [argwatch, "serve", "--policy", str(tmp_path / "policy.yaml"), "--mode-state", str(journal),
         "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"{journal}, line 1: reason: expected a string" in done.stderr


def test_the_example_policy_refuses_a_negative_or_zero_refund() -> None:
    """`amount_cents` of -1, 0 and -2^63 is OUT_OF_RANGE, with what the argument takes."""
    policy = load_policy(str(ROOT / "examples" / "policy.yaml"))
    tool = policy.tools["refund_order"]
    for amount in (-1, 0, -(2**63)):
        problems = schema_problems(tool.schema_validator, {"order_id": "ord_1", "amount_cents": amount})
        assert [(p.code, p.argument) for p in problems] == [(ProblemCode.OUT_OF_RANGE, "amount_cents")], amount
        assert "at least 1" in problems[0].expected
    assert schema_problems(tool.schema_validator, {"order_id": "ord_1", "amount_cents": 1}) == []


async def test_a_tool_the_policy_lacks_keeps_the_reject_override_that_names_it(tmp_path: Path) -> None:
    """A replica on a policy without `legacy_refund` holds an on-call's reject override for it (set through a
    replica on another policy): a call of it is refused as UNKNOWN_TOOL, not let through under observe."""
    journal = tmp_path / "modes.json"
    override = {"legacy_refund": {**OVERRIDE}}
    journal.write_bytes(orjson.dumps({"version": 1, "change": {**CHANGE, "target": "legacy_refund"},
                                      "overrides": override}) + b"\n")  # fmt: skip
    gateway = await gateway_on(tmp_path, POLICY, mode_state=str(journal))
    channel, stub = gateway_stub(gateway)
    try:
        assert gateway.modes.mode_for("legacy_refund") is Mode.REJECT
        assert gateway.modes.mode_for("never_named") is Mode.OBSERVE  # the policy's default, as before
        refused = await stub.Validate(request("legacy_refund", {"order_id": "ord_1"}), timeout=5)
        assert refused.decision == pb.DECISION_REJECT
        assert [p.code for p in refused.problems] == [pb.PROBLEM_CODE_UNKNOWN_TOOL]
        other = await stub.Validate(request("never_named", {}), timeout=5)
        assert other.decision == pb.DECISION_ALLOW
    finally:
        await channel.close()
        await gateway.stop(0)
