"""Schemas: tool definitions imported as-is (MCP, OpenAI, Anthropic), and JSON Schema violations as problems."""

from __future__ import annotations

import os

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.schema_compile import compile_schema
from argwatch.server.policy.tool_import import DefinitionError, parse_definitions
from argwatch.server.verdict.findings import ProblemCode
from argwatch.server.verdict.schema_checks import schema_problems

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
REFUND = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ord_[0-9]+$"},
        "amount_cents": {"type": "integer", "minimum": 1},
        "filters": {
            "type": "object",
            "properties": {"since": {"type": "string", "format": "date"}},
            "additionalProperties": False,
        },
        "tags": {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
    },
    "required": ["order_id", "amount_cents"],
    "additionalProperties": False,
}


def found(arguments: dict[str, object]) -> list[tuple[ProblemCode, str]]:
    return [(p.code, p.argument) for p in schema_problems(compile_schema(REFUND), arguments)]


def test_a_call_that_passes_has_no_problem() -> None:
    assert found({"order_id": "ord_1", "amount_cents": 120, "filters": {"since": "2026-01-02"}}) == []


def test_each_kind_of_violation_gets_its_code() -> None:
    assert found({"amount_cents": 0, "status_filter": "open", "tags": ["a", "b"]}) == [
        (ProblemCode.MISSING_REQUIRED, "order_id"),
        (ProblemCode.UNEXPECTED_ARGUMENT, "status_filter"),
        (ProblemCode.OUT_OF_RANGE, "amount_cents"),
        (ProblemCode.OUT_OF_RANGE, "tags[1]"),  # a 2020-12 keyword (prefixItems + items: false), at the item
    ]
    assert found({"order_id": 7, "amount_cents": "120"}) == [
        (ProblemCode.WRONG_TYPE, "amount_cents"),
        (ProblemCode.WRONG_TYPE, "order_id"),
    ]
    assert found({"order_id": "ord_1", "amount_cents": 1, "filters": {"since": "yesterday", "x": 1}}) == [
        (ProblemCode.UNEXPECTED_ARGUMENT, "filters.x"),
        (ProblemCode.OUT_OF_RANGE, "filters.since"),  # format: date, asserted
    ]


@pytest.mark.parametrize(
    "document",
    [
        {"tools": [{"name": "t", "description": "d", "inputSchema": REFUND}]},  # MCP
        {"result": {"tools": [{"name": "t", "description": "d", "inputSchema": REFUND}]}},  # its JSON-RPC envelope
        [{"type": "function", "function": {"name": "t", "description": "d", "parameters": REFUND}}],  # OpenAI
        [{"type": "function", "name": "t", "description": "d", "parameters": REFUND}],  # OpenAI Responses
        [{"name": "t", "description": "d", "input_schema": REFUND}],  # Anthropic
    ],
)
def test_tool_definitions_are_read_as_they_exist(document: object) -> None:
    (definition,) = parse_definitions(document, "tools.json")
    assert (definition.name, definition.description, definition.schema) == ("t", "d", REFUND)


def test_a_definition_without_a_name_is_an_error() -> None:
    with pytest.raises(DefinitionError, match=r"tools.json\[0\]: a tool definition needs a name"):
        parse_definitions([{"input_schema": {}}], "tools.json")


def test_imported_tools_take_bindings_from_the_policy_layered_on_top() -> None:
    policy = parse_policy(
        b"""
tool_definitions: [mcp_tools.json]
sources: {s: {file: x.yaml}}
value_sets: {refunds.reason_codes: {source: s}}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: refunds.reason_codes}
""",
        os.path.join(DATA, "policy.yaml"),
    )
    refund, search = policy.tools["refund_order"], policy.tools["search_orders"]
    assert (refund.mode.value, refund.description, [b.name for b in refund.arguments]) == (
        "reject",
        "Refund an order.",
        ["reason_code"],
    )
    assert refund.schema_validator is not None and search.schema_validator is not None
    assert refund.known_arguments == {"order_id", "reason_code", "amount_cents", "note"}


def test_an_invalid_schema_is_a_load_error_with_its_location() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(b"tools: {t: {schema: {type: object, properties: {a: {type: strnig}}}}}\n", "/p.yaml")
    (issue,) = raised.value.issues
    assert issue.path == "tools.t.schema"
    assert "not a valid JSON Schema" in issue.message and "$.properties.a.type" in issue.message


def test_k_missing_arguments_are_k_problems_not_k_squared() -> None:
    """jsonschema raises one `required` error per missing name, each listing every missing name: three
    missing arguments were nine problems."""
    three = {**REFUND, "required": ["order_id", "amount_cents", "filters"]}
    problems = [(p.code, p.argument) for p in schema_problems(compile_schema(three), {})]
    assert problems == [
        (ProblemCode.MISSING_REQUIRED, "order_id"),
        (ProblemCode.MISSING_REQUIRED, "amount_cents"),
        (ProblemCode.MISSING_REQUIRED, "filters"),
    ]
    nested = {"type": "object", "properties": {"to": {"type": "object", "required": ["a", "b"]}}}
    inner = [p.argument for p in schema_problems(compile_schema(nested), {"to": {}})]
    assert inner == ["to.a", "to.b"]
