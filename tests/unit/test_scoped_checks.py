"""The checker on a scoped set: judged within the call's scope, another scope's member told apart only in the
counts, a call naming no scope a problem (never a pass), and another customer's record read as not found."""

from __future__ import annotations

import pytest

from argwatch.server.policy.model import ArgumentBinding, Failure, Mode, Normalisation, RecordBinding, ToolPolicy
from argwatch.server.records.checks import concealed_owner
from argwatch.server.sets.scoped import scope_key
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.findings import Problem, ProblemCode, Shape
from argwatch.server.verdict.set_checks import all_in_sets, check_arguments, concealed_scope, members_plan
from tests.snapshots import make_snapshot

SET = "billing.payment_methods"
MEMBERS = {"cus_a": ["pm_visa_4242", "pm_sepa_0001"], "cus_b": ["pm_amex_0005"]}


def reading() -> SetReading:
    keys = [scope_key(scope, value) for scope, values in MEMBERS.items() for value in values]
    retired = {
        scope_key("cus_a", "pm_visa_1111"): __import__("argwatch.server.sets.payload").server.sets.payload.Retirement(
            None, "pm_visa_4242"
        )
    }
    snapshot = make_snapshot(SET, 1, keys, received_at=0.0, rules=(Normalisation(),), scoped=True, retirements=retired)
    return SetReading(snapshot, 0.0, False)


def tool(reveal: bool = False) -> ToolPolicy:
    binding = ArgumentBinding(
        "payment_method_id", SET, Normalisation(), scope="customer_id", reveal_other_scopes=reveal
    )
    return ToolPolicy(name="pay_invoice", mode=Mode.REJECT, arguments=(binding,))


def check(value: object, customer: str, reveal: bool = False):
    return check_arguments(
        tool(reveal),
        {"payment_method_id": value},
        {SET: reading()},
        {SET: Failure.OPEN},
        session={"customer_id": customer, "tenant": ""},
    )


def test_a_member_of_the_callers_own_scope_passes_on_the_prepared_path_and_the_full_one() -> None:
    plan = members_plan(tool())
    session = {"customer_id": "cus_a", "tenant": ""}
    assert all_in_sets(plan, {"payment_method_id": "pm_visa_4242"}, {SET: reading()}, session) is not None
    assert check("pm_visa_4242", "cus_a").problems == ()


def test_another_scopes_member_misses_and_reads_word_for_word_like_an_invented_value() -> None:
    plan = members_plan(tool())
    session = {"customer_id": "cus_a", "tenant": ""}
    assert all_in_sets(plan, {"payment_method_id": "pm_amex_0005"}, {SET: reading()}, session) is None
    (theirs,) = check("pm_amex_0005", "cus_a").problems
    (invented,) = check("pm_amex_0009", "cus_a").problems
    assert theirs.code is invented.code is ProblemCode.OUT_OF_SET
    assert (theirs.shape, invented.shape) == (Shape.OTHER_SCOPE, Shape.INVENTED)  # the counts tell them apart
    shown = concealed_scope(theirs)
    assert (shown.shape, shown.message) == (invented.shape, invented.message.replace("0009", "0005"))
    assert "cus_b" not in theirs.message and "another" not in theirs.message


def test_the_policy_may_reveal_that_a_value_is_another_scopes() -> None:
    (problem,) = check("pm_amex_0005", "cus_a", reveal=True).problems
    assert problem.shape is Shape.OTHER_SCOPE
    assert problem.message.endswith("is not in billing.payment_methods for this customer: it is another customer's")


def test_slips_and_retirements_are_judged_within_the_scope_and_suggest_only_its_members() -> None:
    (slip,) = check("PM-VISA-4242", "cus_a").problems
    assert (slip.shape, slip.suggestion) == (Shape.SEPARATOR, "pm_visa_4242")
    (elsewhere,) = check("PM-AMEX-0005", "cus_a").problems  # a slip of cus_b's member is no slip for cus_a
    assert (elsewhere.shape, elsewhere.suggestion) == (Shape.INVENTED, "")
    (retired,) = check("pm_visa_1111", "cus_a").problems
    assert (retired.shape, retired.suggestion) == (Shape.RETIRED, "pm_visa_4242")
    (not_retired_here,) = check("pm_visa_1111", "cus_b").problems
    assert not_retired_here.shape is Shape.INVENTED


def test_a_value_spelling_another_scopes_key_is_no_member() -> None:
    forged = scope_key("cus_b", "pm_amex_0005")
    assert (
        all_in_sets(members_plan(tool()), {"payment_method_id": forged}, {SET: reading()}, {"customer_id": "cus_a"})
        is None
    )
    (problem,) = check(forged, "cus_a").problems
    assert problem.code is ProblemCode.OUT_OF_SET


@pytest.mark.parametrize("customer", ["", "cus_a\x00x", "c" * 257])
def test_a_call_naming_no_usable_scope_is_a_problem_never_a_pass_nor_judged_against_every_scope(customer: str) -> None:
    assert (
        all_in_sets(
            members_plan(tool()), {"payment_method_id": "pm_visa_4242"}, {SET: reading()}, {"customer_id": customer}
        )
        is None
    )
    result = check("pm_visa_4242", customer)
    (problem,) = result.problems
    assert problem.code is ProblemCode.MISSING_SCOPE
    assert problem.value == ""  # not the model's value at fault: no offender, nothing sampled
    assert "session.customer_id is empty or unusable" in problem.message
    assert result.value_checks == ()  # not judged: the out-of-set rate is not moved either way


def test_another_customers_record_reads_to_the_caller_as_one_that_does_not_exist() -> None:
    binding = RecordBinding("order", "orders", "order", "order_id", owner_attribute="customer_id", lookup_tool="find")
    owned = Problem(
        ProblemCode.NOT_OWNED,
        'order_id: the order "ord_9" belongs to another customer',
        argument="order_id",
        value_set="record.order",
        value='"ord_9"',
    )
    shown = concealed_owner(binding, owned)
    assert shown.code is ProblemCode.NOT_FOUND
    assert shown.message == 'order_id: no order "ord_9" exists; look it up first with find'
    other = Problem(ProblemCode.NOT_FOUND, "x", argument="order_id", value_set="record.order")
    assert concealed_owner(binding, other) is other


def test_each_element_of_an_array_is_judged_within_the_scope_and_no_scope_is_one_problem() -> None:
    binding = ArgumentBinding("payments[*].method", SET, Normalisation(), scope="customer_id")
    scoped_tool = ToolPolicy(name="split_payment", mode=Mode.REJECT, arguments=(binding,))
    arguments = {"payments": [{"method": "pm_visa_4242"}, {"method": "pm_amex_0005"}, {"method": "pm_sepa_0001"}]}

    def judged(customer: str) -> list[tuple[ProblemCode, str, Shape]]:
        result = check_arguments(
            scoped_tool, arguments, {SET: reading()}, {SET: Failure.OPEN}, session={"customer_id": customer}
        )
        return [(p.code, p.argument, p.shape) for p in result.problems]

    assert judged("cus_a") == [(ProblemCode.OUT_OF_SET, "payments[1].method", Shape.OTHER_SCOPE)]
    assert judged("") == [(ProblemCode.MISSING_SCOPE, "payments[*].method", Shape.NONE)]
