"""Repair messages: what failed, the legal values (whole or nearest few), nothing executed, what to do."""

from __future__ import annotations

import json

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


def test_a_large_set_never_tells_the_model_that_the_few_shown_are_all_there_is() -> None:
    advice = advise(not_in_set("user", "big", "handle-0O123"))
    assert "Do not guess a value that is not listed" not in advice.message
    assert (
        "Not every valid value of user is listed above, so the one meant may be valid though not listed: take it "
        "from an earlier tool result or ask the user. Never guess one."
    ) in advice.message


CODES = [f"CODE_{i:02d}" for i in range(28)]
REGIONS = [f"REGION_{i:02d}" for i in range(80)]
ENUMS = parse_policy(
    f"""
sources: {{owners: {{grpc: {{target: "127.0.0.1:1"}}}}}}
tools:
  t:
    schema:
      type: object
      properties:
        code: {{enum: {CODES}}}
        region: {{$ref: "#/$defs/region"}}
        size: {{enum: [1, 2, "XL", null]}}
      $defs:
        region: {{enum: {REGIONS}}}
    records:
      area: {{source: owners, kind: region, id_argument: region, lookup_tool: search_regions}}
""".encode(),
    "/p.yaml",
)


def enum_advice(arguments: dict[str, object], policy=ENUMS):
    from argwatch.server.verdict.schema_checks import schema_problems

    problems = schema_problems(ENUMS.tools["t"].schema_validator, arguments)
    return build_advice(
        call_id="c", tool="t", policy=policy, problems=problems, snapshots={}, attempt=1, give_up_reason=""
    )


def test_an_enum_of_28_is_listed_whole_as_a_set_of_28_would_be() -> None:
    """The schema's enum is listed up to repair.list_limit (50 by default), not cut at 20."""
    advice = enum_advice({"code": "code-07"})
    (legal,) = advice.legal_values
    assert (legal.argument, legal.value_set, legal.values, legal.total, legal.complete) == (
        "code",
        "",
        tuple(CODES),
        28,
        True,
    )
    lines = advice.message.splitlines()
    assert lines[1:3] == [
        '- code: "code-07" is not a valid value.',
        "  Valid values (28): " + ", ".join(f'"{code}"' for code in CODES) + ".",
    ]
    assert "more)" not in advice.message
    assert "Do not guess a value that is not listed; if none fits, ask the user." in advice.message


def test_an_enum_past_the_limit_offers_the_nearest_and_where_to_find_the_rest() -> None:
    """An enum of 80: the nearest five and the total, reached through a $ref; the model is pointed at the
    record's lookup tool, and never told not to guess a value that is not listed."""
    advice = enum_advice({"region": "REGON_07"})
    (legal,) = advice.legal_values
    assert (legal.total, legal.complete, len(legal.values), legal.values[0]) == (80, False, 5, "REGION_07")
    assert '  The 5 closest of 80 valid values: "REGION_07", ' in advice.message
    assert "Do not guess a value that is not listed" not in advice.message
    assert (
        "Not every valid value of region is listed above, so the one meant may be valid though not listed: look "
        "it up with search_regions, take it from an earlier tool result, or ask the user. Never guess one."
    ) in advice.message


def test_an_enum_of_other_json_types_is_listed_as_json_and_not_offered_as_strings() -> None:
    """LegalValues carries strings a client copies as they are: "1" there would send a string for the number 1."""
    advice = enum_advice({"size": "xl"})
    assert '  Valid values (4): 1, 2, "XL", null.' in advice.message
    assert advice.legal_values == ()


def test_an_enum_no_longer_in_the_schema_is_not_listed_and_not_claimed_to_be() -> None:
    """Repair reads the enum from the policy as it is now: after a reload that moved it, the problem's own
    summary is shown, and the model is not told that what it saw was every value."""
    reloaded = parse_policy(b"tools: {t: {schema: {type: object}}}\n", "/p.yaml")
    advice = enum_advice({"region": "REGON_07"}, policy=reloaded)
    assert advice.legal_values == ()
    assert '- region: "REGON_07" is not accepted; expected one of "REGION_00",' in advice.message
    assert "Do not guess a value that is not listed" not in advice.message


def test_a_record_that_is_not_found_points_at_its_lookup_tool_not_at_a_list() -> None:
    """A record's ids are never listed, so "a value that is not listed" would be every value."""
    problem = Problem(ProblemCode.NOT_FOUND, 'region: no region "R9" exists', "region", "record.area", value='"R9"')
    advice = build_advice(
        call_id="c", tool="t", policy=ENUMS, problems=[problem], snapshots={}, attempt=1, give_up_reason=""
    )
    assert "Do not guess a value that is not listed" not in advice.message
    assert "look it up with search_regions, take it from an earlier tool result, or ask the user" in advice.message


def test_elements_of_one_array_missing_a_long_enum_are_named_once_in_the_advice() -> None:
    from argwatch.server.verdict.schema_checks import schema_problems

    schema = {"type": "object", "properties": {"regions": {"type": "array", "items": {"enum": REGIONS}}}}
    policy = parse_policy(json.dumps({"tools": {"t": {"schema": schema}}}).encode(), "/p.yaml")
    problems = schema_problems(policy.tools["t"].schema_validator, {"regions": ["REGON_01", "REGION_02", "RGION_03"]})
    advice = build_advice(
        call_id="c", tool="t", policy=policy, problems=problems, snapshots={}, attempt=1, give_up_reason=""
    )
    assert [legal.argument for legal in advice.legal_values] == ["regions[0]", "regions[2]"]
    assert "Not every valid value of regions[*] is listed above" in advice.message
    assert "Do not guess a value that is not listed" not in advice.message


def test_a_value_that_misses_two_enums_gets_neither_listed_as_all_there_is() -> None:
    """Under allOf the valid values are in both enums: listing one would offer values the other refuses."""
    from argwatch.server.verdict.schema_checks import schema_problems

    schema = {"type": "object", "properties": {"x": {"allOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}}}
    policy = parse_policy(json.dumps({"tools": {"t": {"schema": schema}}}).encode(), "/p.yaml")
    (problem,) = schema_problems(policy.tools["t"].schema_validator, {"x": "z"})
    advice = build_advice(
        call_id="c", tool="t", policy=policy, problems=[problem], snapshots={}, attempt=1, give_up_reason=""
    )
    assert advice.legal_values == ()
    assert '- x: "z" is not accepted; expected one of "a", "b" and one of "b", "c".' in advice.message
    assert "Do not guess a value that is not listed" not in advice.message
