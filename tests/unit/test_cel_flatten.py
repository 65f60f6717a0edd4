"""Rules over plain variables answer as the nested rules do, on any call; what the rewrite cannot take stays nested."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.policy.cel_flatten import flatten, variable_name
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.verdict.rule_checks import check_rules


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (
            "args.amount_cents <= record.order.paid_cents",
            "_args_12amount_cents <= _record_5order_10paid_cents",
        ),
        ("record.order.status != 'refunded'", "_record_5order_6status != 'refunded'"),
        # Strings are copied as they are, whatever they contain.
        (
            "'args.x' != args . kind && \"record.a.b\" != r'args.y'",
            "'args.x' != _args_4kind && \"record.a.b\" != r'args.y'",
        ),
        ("size(args.note) < 10 && args.note.size() < 10", "size(_args_4note) < 10 && _args_4note.size() < 10"),
        ("args.filter.since > session.tenant", "_args_6filter.since > _session_6tenant"),
        ("args.tags.exists(t, t == 'vip')", "_args_4tags.exists(t, t == 'vip')"),
        ("x.args == 1 || args.a == 1", "x.args == 1 || _args_1a == 1"),
    ],
)
def test_field_chains_become_variables(expression: str, expected: str) -> None:
    flat = flatten(expression)
    assert flat is not None and flat.expression == expected


@pytest.mark.parametrize(
    "expression",
    [
        "has(args.note) ? args.note != '' : true",  # presence needs the map
        "size(args) < 3",  # a bare root
        "args['amount_cents'] > 1",  # an index
        "record.order.size() > 0",  # a method on the record's map
        "[1, 2].all(args, args > 0)",  # a comprehension variable named like a root
        "args.?note.orValue('') == ''",  # optional selection
        "1 == 1",  # nothing to rewrite
        "'unterminated",
    ],
)
def test_what_the_rewrite_does_not_take_stays_nested(expression: str) -> None:
    assert flatten(expression) is None


def test_no_two_paths_share_a_variable() -> None:
    assert variable_name(("args", "a__b", "c")) != variable_name(("args", "a", "b__c"))
    assert variable_name(("record", "order", "paid_cents")) == "_record_5order_10paid_cents"


RULES = [
    "args.amount_cents <= record.order.paid_cents",
    "record.order.status != 'refunded'",
    "args.amount_cents > 0 && session.customer_id == record.order.customer_id",
    "size(args.note) < 12 || args.amount_cents < 100",
    "args.note.startsWith('x') == (record.order.status == 'paid')",
    "has(args.note) ? args.note != '' : true",
    "args.tags.exists(t, t == 'vip') || args.amount_cents % 2 == 0",
]
POLICY = {
    "sources": {"orders_db": {"grpc": {"target": "127.0.0.1:1", "timeout": "1s"}}},
    "tools": {
        "refund_order": {
            "records": {"order": {"source": "orders_db", "kind": "order", "id_argument": "order_id"}},
            # What the rules read, typed (a rule's inputs must be): values of other types are drawn all the same.
            "schema": {
                "type": "object",
                "properties": {
                    "amount_cents": {"type": "number"},
                    "note": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},  # its elements, read, are typed
                },
            },
            "rules": [
                {"name": f"r{i}", "expr": expression, "argument": "amount_cents"} for i, expression in enumerate(RULES)
            ],
        }
    },
}


def tools() -> tuple[ToolPolicy, ToolPolicy]:
    tool = parse_policy(json.dumps(POLICY).encode(), "/srv/policy.yaml").tools["refund_order"]
    assert sum(rule.flat_program is not None for rule in tool.rules) == len(RULES) - 1  # all but has()
    nested = dataclasses.replace(
        tool, rules=tuple(dataclasses.replace(rule, flat_program=None, flat_paths=()) for rule in tool.rules)
    )
    return tool, nested


FLAT, NESTED = tools()
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
    st.lists(st.sampled_from(["vip", "x", 1]), max_size=3),
)


def maybe(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with any subset of `keys`, each holding any value, or an ordinary-looking one."""
    return st.fixed_dictionaries({}, optional={key: values for key in keys})


@settings(max_examples=300, deadline=None)
@given(
    arguments=maybe(["amount_cents", "note", "tags", "order_id"]),
    order=st.one_of(st.none(), maybe(["paid_cents", "status", "customer_id"])),
    customer=st.sampled_from(["cus_1", "cus_2", ""]),
)
def test_flat_and_nested_rules_give_the_same_outcome(
    arguments: dict[str, Any], order: dict[str, Any] | None, customer: str
) -> None:
    found = {} if order is None else {"order": order}
    session = {"customer_id": customer, "tenant": ""}
    flat = check_rules(FLAT, arguments, found, session)
    nested = check_rules(NESTED, arguments, found, session)
    assert sorted(flat.errors) == sorted(nested.errors)
    assert sorted(p.message for p in flat.problems) == sorted(p.message for p in nested.problems)


def test_an_each_rule_s_element_is_one_more_root() -> None:
    flat = flatten("item.quantity > 0 && item.quantity <= args.max_quantity", "item")
    assert flat is not None and flat.expression == "_item_8quantity > 0 && _item_8quantity <= _args_12max_quantity"
    assert flatten("item.quantity > 0") is None  # without an each, `item` is no root
