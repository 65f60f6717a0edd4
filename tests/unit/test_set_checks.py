"""The checker: membership, shapes, normalisation, no coercion, and bad input as problems, never exceptions."""

from __future__ import annotations

import pytest

from argwatch.server.policy.model import (
    ArgumentBinding,
    CaseRule,
    Failure,
    Mode,
    Normalisation,
    ToolPolicy,
)
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.findings import ProblemCode, Shape
from argwatch.server.verdict.set_checks import all_in_sets, check_arguments, classify_shape, members_plan
from tests.snapshots import make_snapshot

CODES = ("DAMAGED_ITEM", "NOT_RECEIVED", "WRONG_ITEM")
LOOSE_RULE = Normalisation()
STRICT_RULE = Normalisation(case=CaseRule.SENSITIVE, separators="", trim=False)


def snapshot(rules: tuple[Normalisation, ...] = (LOOSE_RULE,)):
    return make_snapshot(
        "refunds.reason_codes", 3, CODES, ["BROKEN", "LOST_IN_TRANSIT"], received_at=1000.0, rules=rules
    )


def tool(*bindings: ArgumentBinding) -> ToolPolicy:
    return ToolPolicy(name="refund_order", mode=Mode.REJECT, arguments=bindings)


def binding(name: str = "reason_code", rule: Normalisation = LOOSE_RULE, required: bool = True) -> ArgumentBinding:
    return ArgumentBinding(name=name, value_set="refunds.reason_codes", normalisation=rule, required=required)


def check(
    arguments: dict[str, object], *bindings: ArgumentBinding, available: bool = True, failure: Failure = Failure.OPEN
):
    snap = snapshot(tuple({b.normalisation for b in bindings} or {LOOSE_RULE})) if available else None
    reading = SetReading(snap, 1000.0, False) if snap is not None else None
    return check_arguments(
        tool(*(bindings or (binding(),))),
        arguments,
        {"refunds.reason_codes": reading},
        {"refunds.reason_codes": failure},
    )


def test_a_member_passes_with_no_problem_and_one_value_check() -> None:
    result = check({"reason_code": "DAMAGED_ITEM"})
    assert result.problems == ()
    assert [(c.in_set, c.in_set_normalised) for c in result.value_checks] == [(True, True)]
    assert [r.snapshot.name for r in result.readings_used] == ["refunds.reason_codes"]


@pytest.mark.parametrize(
    ("value", "shape", "suggestion"),
    [
        ("damaged_item", Shape.CASE, "DAMAGED_ITEM"),
        ("Damaged_Item", Shape.CASE, "DAMAGED_ITEM"),
        ("DAMAGED-ITEM", Shape.SEPARATOR, "DAMAGED_ITEM"),
        ("damaged item", Shape.SEPARATOR, "DAMAGED_ITEM"),
        (" DAMAGED_ITEM ", Shape.SEPARATOR, "DAMAGED_ITEM"),
        ("BROKEN", Shape.RETIRED, ""),
        ("lost-in-transit", Shape.RETIRED, ""),
        ("ITEM_DEFECTIVE", Shape.INVENTED, ""),
        ("", Shape.INVENTED, ""),
    ],
)
def test_each_out_of_set_value_gets_its_shape(value: str, shape: Shape, suggestion: str) -> None:
    assert classify_shape(value, snapshot()) == (shape, suggestion)
    (problem,) = check({"reason_code": value}).problems
    assert problem.code is ProblemCode.OUT_OF_SET
    assert problem.shape is shape
    assert problem.suggestion == suggestion


def test_a_formatting_slip_is_in_set_only_after_normalisation() -> None:
    result = check({"reason_code": "damaged-item"})
    assert [(c.in_set, c.in_set_normalised) for c in result.value_checks] == [(False, True)]
    assert result.problems[0].in_set_normalised is True


def test_the_arguments_own_normalisation_decides_in_set_normalised_not_the_shape() -> None:
    result = check({"reason_code": "damaged_item"}, binding(rule=STRICT_RULE))
    assert [(c.in_set, c.in_set_normalised) for c in result.value_checks] == [(False, False)]
    # The shape still says why it missed: a case slip.
    assert result.problems[0].shape is Shape.CASE


def test_an_invented_value_is_out_of_set_either_way_and_never_coerced() -> None:
    result = check({"reason_code": "OTHER"})
    assert [(c.in_set, c.in_set_normalised) for c in result.value_checks] == [(False, False)]
    (problem,) = result.problems
    assert problem.value == '"OTHER"'
    assert problem.suggestion == ""


@pytest.mark.parametrize(
    ("value", "described"),
    [
        (120, "a number (120)"),
        (None, "null"),
        (True, "a boolean"),
        (["DAMAGED_ITEM"], "an array"),
        ({"code": "DAMAGED_ITEM"}, "an object"),
    ],
)
def test_a_non_string_is_a_wrong_type_problem(value: object, described: str) -> None:
    result = check({"reason_code": value})
    (problem,) = result.problems
    assert problem.code is ProblemCode.WRONG_TYPE
    assert described in problem.message
    assert [(c.in_set, c.in_set_normalised) for c in result.value_checks] == [(False, False)]


def test_a_missing_required_argument_is_a_problem_and_an_optional_one_is_not() -> None:
    (problem,) = check({}).problems
    assert problem.code is ProblemCode.MISSING_REQUIRED
    assert problem.argument == "reason_code"
    assert check({}, binding(required=False)).problems == ()


def test_every_problem_is_listed_not_only_the_first() -> None:
    result = check(
        {"a": "nope", "b": 7},
        binding("a"),
        binding("b"),
        binding("c"),
        binding("d"),
    )
    assert [(p.argument, p.code) for p in result.problems] == [
        ("a", ProblemCode.OUT_OF_SET),
        ("b", ProblemCode.WRONG_TYPE),
        ("c", ProblemCode.MISSING_REQUIRED),
        ("d", ProblemCode.MISSING_REQUIRED),
    ]


def test_an_unavailable_set_fails_open_as_a_skipped_check_not_a_pass() -> None:
    result = check({"reason_code": "OTHER"}, available=False)
    assert result.problems == ()
    assert [(s.argument, s.value_set) for s in result.skipped] == [("reason_code", "refunds.reason_codes")]
    assert result.value_checks == ()


def test_an_unavailable_set_that_fails_closed_is_a_problem() -> None:
    result = check({"reason_code": "DAMAGED_ITEM"}, available=False, failure=Failure.CLOSED)
    (problem,) = result.problems
    assert problem.code is ProblemCode.CHECK_UNAVAILABLE
    assert result.skipped == ()


def test_long_values_are_truncated_in_problems() -> None:
    (problem,) = check({"reason_code": "X" * 10_000}).problems
    assert len(problem.value) == 200
    assert problem.value.endswith("…")


def test_a_retired_value_names_when_and_what_replaced_it_where_the_source_said() -> None:
    from argwatch.server.sets.payload import Retirement

    snap = make_snapshot(
        "refunds.reason_codes",
        4,
        ["OTHER", "DAMAGED_ITEM"],
        ["BROKEN"],
        received_at=0.0,
        retirements={"CUSTOMER_UNHAPPY": Retirement(1_790_000_000.0, "OTHER")},
    )
    result = check_arguments(
        tool(binding()), {"reason_code": "CUSTOMER_UNHAPPY"}, {"refunds.reason_codes": SetReading(snap, 0.0, False)}, {}
    )
    (problem,) = result.problems
    assert (problem.shape, problem.suggestion) == (Shape.RETIRED, "OTHER")
    assert problem.message == (
        'reason_code: "CUSTOMER_UNHAPPY" was retired from refunds.reason_codes on 2026-09-21, replaced by "OTHER"'
    )


def test_a_retired_value_that_is_a_member_again_counts_as_a_member() -> None:
    snap = make_snapshot("s", 1, ["A"], ["A", "B"], received_at=0.0)
    assert snap.retired == frozenset({"B"})


def two_set_tool() -> ToolPolicy:
    """Three arguments over two sets, the second set bound twice."""
    return tool(
        binding("reason_code"),
        ArgumentBinding(name="from_code", value_set="other.codes", normalisation=LOOSE_RULE, required=False),
        ArgumentBinding(name="to_code", value_set="other.codes", normalisation=LOOSE_RULE),
    )


def readings_for(available: bool = True) -> dict[str, SetReading | None]:
    other = make_snapshot("other.codes", 1, ["A", "B"], received_at=1000.0)
    return {  # in order of first binding, as the validator builds it
        "refunds.reason_codes": SetReading(snapshot(), 1000.0, False),
        "other.codes": SetReading(other, 1000.0, True) if available else None,
    }


def test_the_all_in_sets_path_reports_what_the_full_checker_reports() -> None:
    checked, readings = two_set_tool(), readings_for()
    arguments = {"reason_code": "WRONG_ITEM", "from_code": "A", "to_code": "B", "note": "free text"}
    fast = all_in_sets(members_plan(checked), arguments, readings)
    assert fast is not None
    assert fast == check_arguments(checked, arguments, readings, {})


@pytest.mark.parametrize(
    "arguments",
    [
        {"reason_code": "WRONG_ITEM", "to_code": "B"},  # an optional argument absent
        {"reason_code": "WRONG_ITEM", "from_code": "a", "to_code": "B"},  # a slip
        {"reason_code": "WRONG_ITEM", "from_code": 1, "to_code": "B"},  # not a string
        {"reason_code": "WRONG_ITEM", "from_code": "A"},  # a required argument absent
    ],
)
def test_anything_but_every_value_in_its_set_goes_to_the_full_checker(arguments: dict[str, object]) -> None:
    assert all_in_sets(members_plan(two_set_tool()), arguments, readings_for()) is None


def test_an_unavailable_set_goes_to_the_full_checker() -> None:
    arguments = {"reason_code": "WRONG_ITEM", "from_code": "A", "to_code": "B"}
    assert all_in_sets(members_plan(two_set_tool()), arguments, readings_for(available=False)) is None
