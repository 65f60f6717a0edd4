"""Repair messages: what failed, the legal values (whole or nearest few), nothing executed, what to do."""

from __future__ import annotations

from argwatch.server.policy.loader import parse_policy
from argwatch.server.repair.message import build_advice
from argwatch.server.verdict.findings import Problem, ProblemCode, Shape
from tests.snapshots import make_snapshot

POLICY = parse_policy(
    b"""
sources: {s: {file: x.yaml}}
value_sets: {small: {source: s}, big: {source: s}}
tools:
  t:
    arguments:
      code: {value_set: small, hint: "If nothing fits, use escalate_ticket instead."}
      user: {value_set: big}
repair: {list_limit: 10, nearest: 4, max_attempts: 3}
""",
    "/p.yaml",
)
SMALL = make_snapshot("small", 1, ["B", "A", "C"], received_at=0.0)
BIG = make_snapshot("big", 1, [f"handle-{i:05d}" for i in range(100_000)], received_at=0.0)


def not_in_set(argument: str, value_set: str, value: str, suggestion: str = "") -> Problem:
    return Problem(
        ProblemCode.OUT_OF_SET,
        "m",
        argument,
        value_set,
        Shape.CASE if suggestion else Shape.INVENTED,
        f'"{value}"',
        suggestion,
    )


def advise(*problems: Problem, attempt: int = 1, give_up: str = ""):
    return build_advice(
        call_id="c",
        tool="t",
        policy=POLICY,
        problems=problems,
        snapshots={"small": SMALL, "big": BIG},
        attempt=attempt,
        give_up_reason=give_up,
    )


def test_a_small_set_is_listed_whole_and_sorted_with_the_hint() -> None:
    advice = advise(not_in_set("code", "small", "Z"))
    assert advice.legal_values[0].values == ("A", "B", "C")
    assert advice.legal_values[0].complete
    assert advice.message.splitlines() == [
        "The call to t was rejected by argument validation. Nothing was executed.",
        '- code: "Z" is not a valid value.',
        '  Valid values (3): "A", "B", "C".',
        "What to do: call t again with each argument above set to one of its valid values, copied "
        "exactly. Do not guess a value that is not listed; if none fits, ask the user.",
        "If nothing fits, use escalate_ticket instead.",
        "(attempt 1 of 3)",
    ]


def test_a_large_set_offers_the_nearest_few_and_the_total_never_the_whole_set() -> None:
    advice = advise(not_in_set("user", "big", "handle-0O123"))
    (legal,) = advice.legal_values
    assert (legal.total, legal.complete, len(legal.values)) == (100_000, False, 4)
    assert legal.values[0] == "handle-00123"
    assert "The 4 closest of 100000 valid values" in advice.message
    assert len(advice.message) < 800


def test_a_formatting_slip_puts_the_exact_legal_value_first() -> None:
    advice = advise(not_in_set("user", "big", "HANDLE-00042", suggestion="handle-00042"))
    assert advice.legal_values[0].values[0] == "handle-00042"
    assert 'the valid value is "handle-00042" (exact spelling and case)' in advice.message


def test_every_problem_gets_its_line() -> None:
    advice = advise(
        not_in_set("code", "small", "Z"),
        Problem(ProblemCode.MISSING_REQUIRED, "m", "user", "big"),
        Problem(ProblemCode.WRONG_TYPE, "m", "code", "small", value="120"),
    )
    assert "- code: " in advice.message and "- user: required, but missing." in advice.message
    assert "- code: expected a string from small, got 120." in advice.message  # what set_checks sets
    assert len(advice.legal_values) == 3


def test_give_up_tells_the_model_to_stop_and_tell_the_user() -> None:
    advice = advise(not_in_set("code", "small", "Z"), attempt=3, give_up="this was attempt 3 of 3")
    assert advice.give_up
    assert "Do not call t again in this conversation: this was attempt 3 of 3." in advice.message
    assert "What to do" not in advice.message


def test_an_unknown_tool_names_the_tools_that_exist() -> None:
    advice = advise(Problem(ProblemCode.UNKNOWN_TOOL, "m", value='"refund"'))
    assert 'There is no tool named "refund". Tools: t.' in advice.message


def test_a_retired_value_says_when_and_what_replaced_it() -> None:
    from argwatch.server.sets.payload import Retirement

    codes = make_snapshot(
        "small",
        2,
        ["OTHER", "A"],
        received_at=0.0,
        retirements={"CUSTOMER_UNHAPPY": Retirement(1_790_000_000.0, "OTHER")},
    )
    problem = Problem(ProblemCode.OUT_OF_SET, "m", "code", "small", Shape.RETIRED, '"CUSTOMER_UNHAPPY"', "OTHER")
    advice = build_advice(
        call_id="c",
        tool="t",
        policy=POLICY,
        problems=[problem],
        snapshots={"small": codes},
        attempt=1,
        give_up_reason="",
    )
    assert (
        '- code: "CUSTOMER_UNHAPPY" is no longer a valid value (it was retired on 2026-09-21, replaced by "OTHER").'
    ) in advice.message
