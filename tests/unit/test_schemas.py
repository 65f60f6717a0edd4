"""Schemas: tool definitions imported as-is (MCP, OpenAI, Anthropic), and JSON Schema violations as problems."""

from __future__ import annotations

import os

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.schema_compile import compile_schema
from argwatch.server.policy.tool_import import DefinitionError, parse_definitions
from argwatch.server.repair.legal_values import enum_at
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


def test_only_the_unexpected_key_is_named_even_with_a_quote_in_it() -> None:
    """jsonschema writes a name with a quote in it as "it's", which reading 'quoted' names from its message
    missed: every argument of the call was then listed as not an argument of the tool (found by
    test_catalogues.py)."""
    problems = found({"order_id": "ord_1", "amount_cents": 1, "it's": 1, 'say "hi"': 2, "plain": 3})
    assert problems == [
        (ProblemCode.UNEXPECTED_ARGUMENT, "it's"),
        (ProblemCode.UNEXPECTED_ARGUMENT, '["say \\"hi\\""]'),
        (ProblemCode.UNEXPECTED_ARGUMENT, "plain"),
    ]
    unevaluated = {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False}
    names = [p.argument for p in schema_problems(compile_schema(unevaluated), {"a": 1, "it's": 1, "b": 2})]
    assert names == ["it's", "b"]


def test_a_value_that_breaks_two_keywords_is_one_problem_with_both_reasons() -> None:
    """The fetch MCP server's `url` is `format: uri` and `minLength: 1`: "" broke both and was listed, and
    counted, as two problems on one argument (found by test_catalogues.py)."""
    schema = {"type": "object", "properties": {"url": {"type": "string", "format": "uri", "minLength": 1}}}
    (problem,) = schema_problems(compile_schema(schema), {"url": ""})
    assert (problem.code, problem.argument) == (ProblemCode.OUT_OF_RANGE, "url")
    assert problem.message == "url: '' is not a 'uri'; '' should be non-empty"
    assert problem.expected == "a string in the format uri and a string of at least 1 characters"


def test_an_enum_miss_names_where_its_enum_is_even_through_a_ref() -> None:
    """Repair lists the enum's members from the schema, so the problem says which enum it missed."""
    schema = {
        "type": "object",
        "properties": {
            "c/d~": {"enum": ["A", "B"]},
            "region": {"$ref": "#/$defs/region"},
            "items": {"type": "array", "items": {"enum": [1, 2]}},
        },
        "$defs": {"region": {"enum": [f"R{i}" for i in range(80)]}},
    }
    problems = schema_problems(compile_schema(schema), {"c/d~": "C", "region": "R", "items": [1, 3]})
    assert [(p.code, p.argument, p.enum_pointer) for p in problems] == [
        (ProblemCode.OUT_OF_SET, "c/d~", "/properties/c~1d~0/enum"),
        (ProblemCode.OUT_OF_SET, "items[1]", "/properties/items/items/enum"),
        (ProblemCode.OUT_OF_SET, "region", "/$defs/region/enum"),
    ]
    assert enum_at(schema, problems[0].enum_pointer) == ["A", "B"]
    # Its words for people and logs stay short; Repair lists the enum itself.
    assert problems[2].expected.endswith('"R19" (and 60 more)')


def test_a_hundred_thousand_faults_list_the_first_and_say_there_are_more() -> None:
    """Listing every one took seconds of the event loop and a verdict past gRPC's 4 MiB."""
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    problems = schema_problems(compile_schema(schema), {"items": ["x"] * 100_000})
    assert len(problems) == 257
    assert problems[0].argument == "items[0]" and problems[255].argument == "items[255]"
    assert problems[-1].code is ProblemCode.MALFORMED_ARGUMENTS
    assert problems[-1].message.startswith("arguments: more than 256 schema problems")
