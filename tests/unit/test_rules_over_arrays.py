"""Rules over arrays: judged as CEL judges them, every element path typed, each list bounded, failures named."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.verdict.findings import ProblemCode, SkippedCheck, SkipReason
from argwatch.server.verdict.rule_checks import RuleOutcome, check_rules

ITEMS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}, "price_cents": {"type": "integer"}},
    },
}


def tool(*rules: dict[str, Any], properties: dict[str, Any] | None = None, **schema: Any) -> ToolPolicy:
    policy = {
        "sources": {"orders_db": {"grpc": {"target": "127.0.0.1:1"}}},
        "tools": {
            "create_order": {
                "schema": {"type": "object", "properties": properties or {"items": ITEMS}, **schema},
                "records": {"order": {"source": "orders_db", "kind": "order", "id_argument": "order_id"}},
                "rules": list(rules),
            }
        },
    }
    return parse_policy(json.dumps(policy).encode(), "/srv/policy.yaml").tools["create_order"]


def judged(policy_tool: ToolPolicy, arguments: dict[str, Any], max_elements: int = 256, **found: Any) -> RuleOutcome:
    return check_rules(policy_tool, arguments, found, {"customer_id": "cus_1", "tenant": ""}, max_elements)


def named(outcome: RuleOutcome) -> list[tuple[ProblemCode, str]]:
    return [(problem.code, problem.argument) for problem in outcome.problems]


def line(quantity: object = 1, price_cents: object = 100, sku: str = "SKU-1") -> dict[str, object]:
    return {"sku": sku, "quantity": quantity, "price_cents": price_cents}


POSITIVE = {"name": "positive", "expr": "args.items.all(i, i.quantity > 0)", "argument": "items"}
EACH_POSITIVE = {
    "name": "each_positive",
    "each": "items[*]",
    "expr": "item.quantity > 0",
    "argument": "items[*].quantity",
    "message": "quantity {item.quantity} is not positive",
}


@pytest.mark.parametrize(
    "expression",
    [
        "args.items.all(i, i.quantity > 0)",
        "args.items.exists(i, i.sku == 'SKU-2')",
        "args.items.exists_one(i, i.sku == 'SKU-2')",
        "args.items.filter(i, i.quantity > 1).size() == 1",
        "args.items.map(i, i.quantity).sum() == 3",
        "sum(args.items.map(i, i.price_cents * i.quantity)) <= 300",
    ],
)
def test_every_macro_and_sum_runs_over_an_array_argument(expression: str) -> None:
    rule = tool({"name": "r", "expr": expression, "argument": "items"})
    assert named(judged(rule, {"items": [line(), line(quantity=2, sku="SKU-2")]})) == []
    failing = judged(rule, {"items": [line(quantity=-1), line(quantity=5, price_cents=900, sku="SKU-3"), line(7)]})
    assert named(failing) == [(ProblemCode.RULE_FAILED, "items")]


def test_a_rule_over_a_record_list_and_the_paid_amount() -> None:
    rule = tool(
        {
            "name": "total",
            "expr": "args.items.map(i, i.price_cents * i.quantity).sum() <= record.order.paid_cents "
            "&& record.order.lines.all(l, l.refundable)",
            "argument": "items",
            "code": "out_of_range",
        },
    )
    order = {"paid_cents": 400, "lines": [{"refundable": True}]}
    assert named(judged(rule, {"items": [line(quantity=4)]}, order=order)) == []
    over = judged(rule, {"items": [line(quantity=5)]}, order=order)
    assert named(over) == [(ProblemCode.OUT_OF_RANGE, "items")]


def test_an_each_rule_names_every_failing_element() -> None:
    rule = tool(EACH_POSITIVE)
    outcome = judged(rule, {"items": [line(), line(quantity=0), line(), line(quantity=-3)]})
    assert named(outcome) == [
        (ProblemCode.RULE_FAILED, "items[1].quantity"),
        (ProblemCode.RULE_FAILED, "items[3].quantity"),
    ]
    assert outcome.problems[0].message == "items[1].quantity: quantity 0 is not positive"
    assert outcome.problems[1].value == "-3"


def test_an_each_rule_without_an_argument_names_the_element() -> None:
    rule = tool({"name": "each_sku", "each": "items[*]", "expr": "item.sku.startsWith('SKU-')"})
    assert named(judged(rule, {"items": [line(), line(sku="x")]})) == [(ProblemCode.RULE_FAILED, "items[1]")]


@pytest.mark.parametrize(
    "quantity",
    ["1", True, None, [1], {"n": 1}, 2**64],  # a bool is a Python int, and 2**64 is beyond CEL's int: neither passes
)
def test_an_element_of_another_type_is_not_compared_but_reported(quantity: object) -> None:
    whole = judged(tool(POSITIVE), {"items": [line(), line(quantity=quantity)]})
    assert named(whole) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]
    assert "items[1].quantity is" in whole.problems[0].message and whole.errors == ["positive"]
    each = judged(tool(EACH_POSITIVE), {"items": [line(), line(quantity=quantity), line(quantity=0)]})
    assert named(each) == [
        (ProblemCode.RULE_NOT_EVALUATED, "items[1].quantity"),
        (ProblemCode.RULE_FAILED, "items[2].quantity"),
    ]


def test_a_string_compared_with_inequality_cannot_pass_a_rule() -> None:
    """CEL's "5" != 5 is true: the value of another type must never get that far."""
    rule = tool({"name": "no_five", "expr": "args.items.all(i, i.quantity != 5)", "argument": "items"})
    assert named(judged(rule, {"items": [line(quantity="5")]})) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]


def test_a_whole_number_sent_as_a_double_is_an_integer() -> None:
    rule = tool({"name": "total", "expr": "sum(args.items.map(i, i.price_cents * i.quantity)) <= 300"})
    assert named(judged(rule, {"items": [line(quantity=2.0)]})) == []


def test_a_sum_beyond_cels_integers_is_not_evaluated() -> None:
    rule = tool({"name": "total", "expr": "args.items.map(i, i.price_cents).sum() > 0", "argument": "items"})
    outcome = judged(rule, {"items": [line(price_cents=2**62), line(price_cents=2**62)]})
    assert named(outcome) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]


def test_an_array_longer_than_the_bound_is_never_a_silent_pass() -> None:
    many = {"items": [line()] * 5}
    whole = judged(tool(POSITIVE), many, max_elements=3)
    assert named(whole) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]
    assert "items has 5 elements; a rule judges at most 3 (limits.max_elements)" in whole.problems[0].message
    # An each rule judges the first elements, and says the rest were not.
    each = judged(tool(EACH_POSITIVE), {"items": [line(quantity=0)] + [line()] * 4}, max_elements=3)
    assert named(each) == [(ProblemCode.RULE_FAILED, "items[0].quantity"), (ProblemCode.RULE_NOT_EVALUATED, "items")]


def test_on_error_open_skips_the_rule_once_and_counts_it() -> None:
    rule = tool({**EACH_POSITIVE, "on_error": "open"})
    outcome = judged(rule, {"items": [line(quantity="a"), line(quantity="b")] + [line()] * 4}, max_elements=5)
    assert outcome.problems == [] and outcome.errors == ["each_positive"]
    # One skipped check for the elements it could not judge, one counting those past the bound.
    assert [(skip.argument, skip.value_set, skip.reason, skip.unchecked) for skip in outcome.skipped] == [
        ("items[*].quantity", "rule.each_positive", SkipReason.UNAVAILABLE, 0),
        ("items[*].quantity", "rule.each_positive", SkipReason.ELEMENTS_LIMIT, 1),
    ]
    whole = judged(tool({**POSITIVE, "on_error": "open"}), {"items": [line()] * 7}, max_elements=5)
    assert whole.problems == [] and whole.skipped == [
        SkippedCheck("items", "rule.positive", SkipReason.ELEMENTS_LIMIT, 7)  # none of the 7 was judged
    ]


def test_a_record_list_longer_than_the_bound_is_not_judged() -> None:
    rule = tool({"name": "lines", "expr": "record.order.lines.all(l, l.ok)", "argument": "items"})
    outcome = judged(rule, {"items": []}, max_elements=2, order={"lines": [{"ok": True}] * 3})
    assert named(outcome) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]
    assert "record.order.lines has 3 elements" in outcome.problems[0].message


def test_nested_arrays_name_the_inner_element() -> None:
    lines = {"type": "array", "items": {"$ref": "#/$defs/line"}}
    orders = {"type": "array", "items": {"type": "object", "properties": {"lines": lines}}}
    line_schema = {"type": "object", "properties": {"quantity": {"type": "integer"}}}
    policy_tool = tool(
        {"name": "each_line", "each": "orders[*].lines[*]", "expr": "item.quantity > 0"},
        properties={"orders": orders},
        **{"$defs": {"line": line_schema}},
    )
    arguments = {"orders": [{"lines": [{"quantity": 1}]}, {"lines": [{"quantity": 1}, {"quantity": 0}]}]}
    assert named(judged(policy_tool, arguments)) == [(ProblemCode.RULE_FAILED, "orders[1].lines[1]")]


def test_an_element_field_nothing_types_is_a_load_error() -> None:
    untyped = {"type": "array", "items": {"type": "object"}}
    with pytest.raises(PolicyError, match=r"reads items\[\*\]\.quantity, whose JSON type nothing declares"):
        tool(POSITIVE, properties={"items": untyped})
    typed = tool({**POSITIVE, "types": {"items[*].quantity": "integer"}}, properties={"items": untyped})
    assert named(judged(typed, {"items": [line(quantity="1")]})) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]


@pytest.mark.parametrize(
    ("each", "error"),
    [("items", r"ends in \[\*\]"), ("items[", "cannot read"), (3, "expected an argument path")],
)
def test_a_bad_each_is_a_load_error(each: object, error: str) -> None:
    with pytest.raises(PolicyError, match=error):
        tool({**EACH_POSITIVE, "each": each})


def test_an_element_without_the_field_is_not_evaluated_unless_the_rule_allows_it() -> None:
    missing = judged(tool(EACH_POSITIVE), {"items": [line(), {"sku": "SKU-2"}]})
    assert named(missing) == [(ProblemCode.RULE_NOT_EVALUATED, "items[1].quantity")]
    optional = tool({**EACH_POSITIVE, "expr": "!has(item.quantity) || item.quantity > 0"})
    assert named(judged(optional, {"items": [line(), {"sku": "SKU-2"}, line(quantity=0)]})) == [
        (ProblemCode.RULE_FAILED, "items[2].quantity")
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
NOT_FIVE = tool(
    {"name": "whole", "expr": "args.items.all(i, i.quantity != 5)", "argument": "items"},
    {"name": "each", "each": "items[*]", "expr": "item.quantity != 5"},
)


@settings(max_examples=100, deadline=None)
@given(quantities=st.lists(json_values, max_size=4))
def test_no_element_value_of_another_type_passes_an_inequality(quantities: list[Any]) -> None:
    """Whatever the model sends as each quantity, both forms pass only when every one is an integer CEL
    holds (a whole double included) other than 5: "5", 5.5, true or [5] never slip through `!= 5`."""
    outcome = judged(NOT_FIVE, {"items": [{"quantity": quantity} for quantity in quantities]})
    accepted = all(
        isinstance(q, int | float) and not isinstance(q, bool) and float(q).is_integer() and -(2**63) <= q < 2**63
        for q in quantities
    ) and 5 not in [q for q in quantities if not isinstance(q, bool)]
    assert (not outcome.problems and not outcome.skipped) == accepted, (quantities, outcome)


def test_an_each_rule_reading_its_whole_list_or_another_array_is_a_load_error() -> None:
    """Per element, CEL would convert the whole list again: the square of its length on the event loop."""
    for expression in ("item.quantity > 0 && size(args.items) < 1000", "item.quantity > 0 && size(args.tags) < 9"):
        with pytest.raises(PolicyError) as raised:
            tool(
                {"name": "r", "each": "items[*]", "expr": expression, "argument": "items[*].quantity"},
                properties={"items": ITEMS, "tags": {"type": "array", "items": {"type": "string"}}},
            )
        assert "an each rule reads its element as item and plain arguments" in str(raised.value)
    plain = tool(
        {"name": "r", "each": "items[*]", "expr": "item.quantity <= args.cap", "argument": "items[*].quantity"},
        properties={"items": ITEMS, "cap": {"type": "integer"}},
    )
    assert named(judged(plain, {"items": [line(quantity=3)], "cap": 2})) == [
        (ProblemCode.RULE_FAILED, "items[0].quantity")
    ]


def test_a_list_read_whole_past_the_bound_is_never_handed_to_cel_whole() -> None:
    nested = {
        "type": "array",
        "items": {"type": "object", "properties": {"lines": {"type": "array", "items": {"type": "integer"}}}},
    }
    # o.lines walked (all) and read whole (size): past the bound, the rule is not judged, and CEL gets no more.
    rule = {
        "name": "r",
        "expr": "args.orders.all(o, o.lines.all(n, n >= 0) && size(o.lines) > 0)",
        "argument": "orders",
    }
    policy_tool = tool(rule, properties={"orders": nested})
    outcome = judged(policy_tool, {"orders": [{"lines": list(range(1000))}]}, max_elements=256)
    assert named(outcome) == [(ProblemCode.RULE_NOT_EVALUATED, "orders")]
    assert "orders[0].lines has 1000 elements; a rule judges at most 256" in outcome.problems[0].message


def test_a_rule_using_map_or_filter_judges_at_most_256_elements_whatever_the_policy_allows() -> None:
    total = {"name": "total", "expr": "sum(args.items.map(i, i.quantity)) <= 100000", "argument": "items"}
    policy_tool = tool(total)
    assert policy_tool.rules[0].arrays is not None and policy_tool.rules[0].arrays.squares
    assert named(judged(policy_tool, {"items": [line()] * 256}, max_elements=10_000)) == []
    over = judged(policy_tool, {"items": [line()] * 257}, max_elements=10_000)
    assert named(over) == [(ProblemCode.RULE_NOT_EVALUATED, "items")]
