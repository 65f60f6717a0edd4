"""`argwatch policy test`: the example tests pass, a broken expectation fails with a diff, bad input exits 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from argwatch.server.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policy_tests"
POLICY = ROOT / "examples" / "policy.yaml"

REFUND = """\
policy: {policy}
sets:
  refunds.reason_codes: [DAMAGED_ITEM]
records:
  order:
    ord_1: {{customer_id: cus_1, paid_cents: 1000}}
cases:
  - name: a refund
    call:
      tool: refund_order
      arguments: {{order_id: ord_1, amount_cents: 500, reason_code: DAMAGED_ITEM}}
      session: {{customer_id: cus_1}}
    expect:
{expect}
"""


def write_case(tmp_path: Path, expect: str, **replace: str) -> Path:
    text = REFUND.format(policy=POLICY, expect=textwrap.indent(textwrap.dedent(expect), " " * 6))
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "case.yaml"
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["policy", "test", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_the_example_policy_passes_its_own_tests() -> None:
    files = sorted(str(path) for path in EXAMPLES.glob("*.yaml"))
    assert len(files) >= 3
    result = subprocess.run(
        [sys.executable, "-m", "argwatch.server.cli", "policy", "test", *files],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.fullmatch(r"\d+ passed, 0 failed \(\d+ cases in \d+ file\(s\)\)\n", result.stdout)


def test_the_example_tests_cover_every_tool_of_the_example_policy() -> None:
    from argwatch.server.policy.loader import load_policy

    written = "".join(path.read_text() for path in EXAMPLES.glob("*.yaml"))
    assert [tool for tool in load_policy(str(POLICY)).tools if f"tool: {tool}\n" not in written] == []


def test_a_passing_case_prints_one_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(write_case(tmp_path, "decision: allow")))
    assert code == 0
    assert out == "1 passed, 0 failed (1 cases in 1 file(s))\n"


def test_a_broken_expectation_fails_with_a_diff_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_case(
        tmp_path,
        """\
        decision: reject
        problems:
          - {code: out_of_range, path: amount_cents}
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert out.splitlines() == [
        f"FAIL {path}:8: a refund",
        "  decision: expected reject, got allow",
        "  problems:",
        "    - out_of_range at amount_cents",
        "0 passed, 1 failed (1 cases in 1 file(s))",
    ]


def test_a_problem_not_expected_is_shown_with_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_case(tmp_path, "decision: allow", **{"reason_code: DAMAGED_ITEM}": "reason_code: HAPPY}"})
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert "    + out_of_set at reason_code (invented): reason_code: " in out


def test_json_gives_expected_and_got_per_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", str(write_case(tmp_path, "decision: reject")))
    assert code == 1
    document = json.loads(out)
    assert (document["passed"], document["failed"]) == (0, 1)
    (case,) = document["cases"]
    assert (case["line"], case["expected"]["decision"], case["got"]["decision"]) == (8, "reject", "allow")


def test_a_set_the_case_does_not_give_fails_open_and_its_skipped_check_can_be_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # refunds.reason_codes fails open: without it, the call passes with its check listed as skipped.
    expect = """\
    decision: allow
    skipped:
      - {path: reason_code, check: refunds.reason_codes}
    """
    path = write_case(tmp_path, expect, **{"  refunds.reason_codes: [DAMAGED_ITEM]\n": ""})
    code, out, _ = run(capsys, str(path))
    assert code == 0, out


@pytest.mark.parametrize(
    ("replace", "named"),
    [
        ({"tool: refund_order": "tool: refund_orders"}, "unknown tool 'refund_orders'"),
        ({"refunds.reason_codes:": "refunds.reasons:"}, "unknown value set 'refunds.reasons'"),
        ({"  order:\n": "  invoice:\n"}, "unknown record 'invoice'"),
        ({"decision: allow": "decision: allow\n      problems: [{code: out_of_bounds, path: x}]"}, "out_of_bounds"),
        ({"    expect:": "    expected_by: me\n    expect:"}, "case.yaml:13: cases[0].expected_by: unknown key"),
        ({"decision: allow": "decision: maybe"}, "expected allow or reject, got 'maybe'"),
    ],
)
def test_a_case_naming_something_unknown_is_an_error_naming_it_never_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], replace: dict[str, str], named: str
) -> None:
    code, out, err = run(capsys, str(write_case(tmp_path, "decision: allow", **replace)))
    assert code == 2
    assert named in err
    assert "no case was run" in err
    assert out == ""


def test_an_invalid_policy_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "policy.yaml"
    broken.write_text("tools: {t: {mode: sometimes}}\n")
    code, _, err = run(capsys, "--policy", str(broken), str(write_case(tmp_path, "decision: allow")))
    assert code == 2
    assert f"{broken}: invalid policy" in err


def test_sets_can_come_from_an_export_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sets.json").write_text(json.dumps({"refunds.reason_codes": {"version": 3, "members": ["LOST"]}}))
    expect = """\
    decision: reject
    problems:
      - {code: out_of_set, path: reason_code, shape: invented}
    """
    path = write_case(
        tmp_path, expect, **{"  refunds.reason_codes: [DAMAGED_ITEM]\n": "", "sets:": "sets_from: sets.json"}
    )
    code, out, _ = run(capsys, str(path))
    assert code == 0, out
