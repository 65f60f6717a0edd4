"""The fast schema check (jsonschema-rs) never passes a call the full check (jsonschema) faults, bar multipleOf."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argwatch.server.policy.schema_compile import CompiledSchema, compile_schema
from argwatch.server.verdict.schema_checks import schema_problems

DATA = os.path.join(os.path.dirname(__file__), "..", "data")

# Every 2020-12 keyword family a tool schema is likely to use (multipleOf apart: see below).
WIDE = {
    "type": "object",
    "$defs": {"code": {"type": "string", "pattern": "^[A-Z_]{2,12}$"}},
    "properties": {
        "order_id": {"type": "string", "pattern": "^ord_[0-9]+$", "maxLength": 20},
        "reason": {"$ref": "#/$defs/code"},
        "amount_cents": {"type": "integer", "minimum": 1, "exclusiveMaximum": 1_000_000},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "status": {"enum": ["open", "shipped", "refunded", 3, None]},
        "kind": {"const": "refund"},
        "tags": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "maxItems": 4},
        "labels": {"type": "array", "uniqueItems": True, "minItems": 1},
        "target": {"oneOf": [{"type": "string", "minLength": 3}, {"type": "integer"}]},
        "notify": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        "since": {"type": "string", "format": "date"},
        "contact": {"type": "string", "format": "email"},
        "extra": {"type": "object", "propertyNames": {"maxLength": 3}, "maxProperties": 2},
        "not_zero": {"not": {"const": 0}},
    },
    "required": ["order_id", "amount_cents"],
    "dependentRequired": {"ratio": ["amount_cents"]},
    "unevaluatedProperties": False,
}


def tool_schemas() -> list[dict[str, Any]]:
    with open(os.path.join(DATA, "mcp_tools.json")) as handle:
        tools = json.load(handle)["result"]["tools"]
    return [WIDE, *(tool["inputSchema"] for tool in tools)]


@functools.cache
def compiled_once(schema_text: str) -> CompiledSchema:
    return compile_schema(json.loads(schema_text))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["ord_1", "ord_", "ORD_12", "REFUND", "ab", "2026-02-30", "2026-01-02", "a@b.co", "x@", ""]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)


def calls(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = [*sorted(schema.get("properties", {})), "unknown"]
    return st.dictionaries(st.sampled_from(names), json_values, max_size=len(names))


@pytest.mark.slow
@pytest.mark.parametrize("schema", tool_schemas(), ids=lambda schema: ",".join(sorted(schema["properties"]))[:30])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_call_the_fast_check_passes_has_no_problem_in_the_full_check(schema: dict[str, Any], data: Any) -> None:
    compiled = compiled_once(json.dumps(schema))
    assert compiled.fast is not None
    arguments = data.draw(calls(schema))
    full = list(compiled.full.iter_errors(arguments))
    if compiled.fast.is_valid(arguments):
        assert full == [], f"the fast check passed {arguments!r}; the full check found {[e.message for e in full]}"
    # Whatever the fast check says, the problems listed are the full check's.
    assert (schema_problems(compiled, arguments) == []) == (full == [] or compiled.fast.is_valid(arguments))


# Where the two validators disagree: (schema, instance, full check passes, fast check passes).
# A new version of either that changes one of these fails here, and the module docstring of
# verdict/schema_checks.py must be brought up to date.
DISAGREEMENTS = [
    # formats: Python's email check is "has an @"; Rust's is RFC 5321. (date-time, uri and hostname agree:
    # pyproject.toml installs the packages jsonschema checks them with.)
    ({"format": "email"}, "a@", True, False),
    ({"type": "number"}, float("inf"), True, False),
    ({"multipleOf": 0.01}, 0.07, False, True),  # exact decimals in Rust; Python's float division says no
]


@pytest.mark.parametrize(("schema", "instance", "full_passes", "fast_passes"), DISAGREEMENTS)
def test_the_known_disagreements_and_who_decides(
    schema: dict[str, Any], instance: object, full_passes: bool, fast_passes: bool
) -> None:
    compiled = compile_schema(schema)
    assert (list(compiled.full.iter_errors(instance)) == []) is full_passes
    assert compiled.fast.is_valid(instance) is fast_passes
    # A pass from either stands: the fast check's when it passes, the full check's otherwise.
    assert (schema_problems(compiled, instance) == []) is (full_passes or fast_passes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "instance"),
    [("^\\d+$", "١٢٣"), ("^\\w+$", "été"), ("^abc$", "abc\n")],  # ASCII \d and \w; $ only at the very end
)
def test_patterns_agree_now_that_both_checks_run_the_same_linear_engine(pattern: str, instance: str) -> None:
    """Python's re once took these (Unicode \\d and \\w, $ before a final newline) and so decided; both checks
    now search with the Rust engine (linear_regex.py), and both refuse them."""
    compiled = compile_schema({"type": "string", "pattern": pattern})
    assert compiled.fast.is_valid(instance) is False
    assert [error.validator for error in compiled.full.iter_errors(instance)] == ["pattern"]


def test_a_value_the_fast_check_cannot_convert_goes_to_the_full_check() -> None:
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 1}}})
    assert schema_problems(compiled, {"a": "\ud800"}) == []  # a lone surrogate: Rust cannot encode it
    assert [p.argument for p in schema_problems(compiled, {"a": "\ud800\ud800"})] == ["a"]


def test_a_schema_the_fast_check_cannot_take_is_checked_in_full() -> None:
    # A remote $ref is never fetched (offline); the full check then reports what it can.
    compiled = compile_schema({"properties": {"a": {"$ref": "https://schemas.invalid/a.json"}}, "maxProperties": 1})
    assert compiled.fast is None
    assert [p.code.value for p in schema_problems(compiled, {"b": 1, "c": 2})] == ["out_of_range"]
