"""Issue 17.1: a rule cannot be slipped past by sending the wrong JSON type, or by leaving its field out.

On main before the fix, "99999999" (a string), true, or no amount_cents at all
each got a clean ALLOW from a reject-mode tool whose rule refuses 99999999:
the rule's error was only counted. Now it is a RULE_NOT_EVALUATED problem, or a
listed and counted skip where the policy asks for on_error: open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.policy.loader import parse_policy
from argwatch.server.verdict.rule_checks import check_rules
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, request, value

POLICY = """
tools:
  refund_order:
    mode: reject
    rules:
      - name: at_most_5000
        expr: args.amount_cents <= 5000
        argument: amount_cents
        code: out_of_range
        types: {amount_cents: number}
  transfer:
    mode: reject
    rules:
      - {name: not_the_blocked_account, expr: "args.account_id != 12345", argument: account_id,
         types: {account_id: integer}}
      - {name: not_sanctioned, expr: "!(args.country in ['KP', 'IR'])", argument: country,
         types: {country: string}}
  issue_credit:
    mode: reject
    rules:
      - name: credit_at_most_5000
        expr: args.amount_cents <= 5000
        argument: amount_cents
        on_error: open
        types: {amount_cents: number}
"""
PARSED = parse_policy(POLICY.encode(), "/srv/policy.yaml")
TOOL = PARSED.tools["refund_order"]
TRANSFER = PARSED.tools["transfer"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(amount=json_values, present=st.booleans())
def test_no_value_of_any_json_type_passes_a_rule_that_would_refuse_it(amount: Any, present: bool) -> None:
    """Whatever the model sends for amount_cents (any JSON type, or nothing), the call passes the rule
    cleanly only when amount_cents is a number the rule accepts."""
    arguments = {"amount_cents": amount} if present else {}
    outcome = check_rules(TOOL, arguments, {}, {"customer_id": "", "tenant": ""})
    passed = not outcome.problems and not outcome.skipped
    a_number_it_accepts = (
        present and isinstance(amount, int | float) and not isinstance(amount, bool) and amount <= 5000
    )
    assert passed == a_number_it_accepts, (arguments, outcome)


@settings(max_examples=400, deadline=None)
@given(account=json_values, country=json_values, present=st.booleans())
def test_equality_and_membership_cannot_be_passed_by_another_type(account: Any, country: Any, present: bool) -> None:
    """CEL compares values of different types as unequal instead of failing, so `args.account_id != 12345`
    would pass "12345" and `!(args.country in ['KP'])` would pass ["KP"]: a rule's inputs have declared types,
    and a value of another type is reported, never compared."""
    arguments = {"account_id": account, "country": country} if present else {}
    outcome = check_rules(TRANSFER, arguments, {}, {"customer_id": "", "tenant": ""})
    passed = not outcome.problems and not outcome.skipped
    an_integer = isinstance(account, int | float) and not isinstance(account, bool) and float(account).is_integer()
    allowed = present and an_integer and account != 12345 and isinstance(country, str) and country not in ("KP", "IR")
    assert passed == allowed, (arguments, outcome)


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({"amount_cents": "99999999"}, 'amount_cents is a string "99999999"'),
        ({"amount_cents": True}, "amount_cents is a boolean true"),
        ({}, "amount_cents is missing"),
    ],
)
async def test_a_wrong_type_or_a_missing_field_is_refused_naming_the_rule(
    tmp_path: Path, arguments: dict[str, Any], sent: str
) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        verdict = await stub.Validate(request("refund_order", arguments), timeout=5)
        assert verdict.decision == pb.DECISION_REJECT
        [problem] = verdict.problems
        assert problem.code == pb.PROBLEM_CODE_RULE_NOT_EVALUATED
        assert problem.argument == "amount_cents" and problem.value_set == "rule.at_most_5000"
        assert sent in problem.message
        repair = await stub.Repair(pb.RepairRequest(call_id=verdict.call_id), timeout=5)
        assert "at_most_5000" in repair.message and sent in repair.message
        right_type = await stub.Validate(request("refund_order", {"amount_cents": 99999999}), timeout=5)
        assert [p.code for p in right_type.problems] == [pb.PROBLEM_CODE_OUT_OF_RANGE]
        fine = await stub.Validate(request("refund_order", {"amount_cents": 1200}), timeout=5)
        assert fine.decision == pb.DECISION_ALLOW and not fine.problems
    finally:
        await channel.close()
        await gateway.stop(0)


async def test_a_rule_the_policy_lets_fail_open_lists_and_counts_the_skip(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        verdict = await stub.Validate(
            pb.ValidateRequest(tool="issue_credit", arguments_json=orjson.dumps({"amount_cents": "lots"})), timeout=5
        )
        assert verdict.decision == pb.DECISION_ALLOW and not verdict.problems
        assert [(s.argument, s.value_set) for s in verdict.skipped] == [("amount_cents", "rule.credit_at_most_5000")]
        labels = {"tool": "issue_credit", "set": "rule.credit_at_most_5000"}
        assert value(gateway.registry, "tool_argument_check_unavailable_total", **labels) == 1
        assert (
            value(gateway.registry, "argwatch_rule_errors_total", tool="issue_credit", rule="credit_at_most_5000") == 1
        )
    finally:
        await channel.close()
        await gateway.stop(0)


def test_a_rule_reading_an_argument_of_undeclared_type_does_not_load() -> None:
    from argwatch.server.policy.loader import PolicyError

    with pytest.raises(
        PolicyError, match=r"rules\[0\]\.expr: reads args\.account_id, whose JSON type nothing declares"
    ):
        parse_policy(POLICY.replace("\n         types: {account_id: integer}", "").encode(), "/srv/policy.yaml")


def test_on_error_takes_only_open_or_closed() -> None:
    from argwatch.server.policy.loader import PolicyError

    with pytest.raises(PolicyError, match=r"rules\[0\]\.on_error"):
        parse_policy(POLICY.replace("on_error: open", "on_error: maybe").encode(), "/srv/policy.yaml")
