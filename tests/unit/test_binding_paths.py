"""Binding paths: parsed and written in one notation, walked through the schema at load, located per call."""

from __future__ import annotations

import json
import textwrap

import pytest

from argwatch.server.policy.arg_paths import format_path, label_for, parse_path, pattern_of
from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.verdict.arg_values import locate

SCHEMA = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku"],
                "properties": {"sku": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
            },
        },
        "shipping": {"$ref": "#/$defs/address"},
        "note": {"type": "string"},
    },
    "$defs": {"address": {"type": "object", "properties": {"country": {"type": "string"}}}},
}


def policy(bindings: dict[str, str]) -> str:
    """A policy of one tool with SCHEMA and `bindings` (path -> value set), as JSON (which is YAML)."""
    return json.dumps(
        {
            "sources": {"local": {"file": "sets.yaml"}},
            "value_sets": {"skus": {"source": "local"}},
            "tools": {
                "create_order": {
                    "schema": SCHEMA,
                    "arguments": {path: {"value_set": value_set} for path, value_set in bindings.items()},
                }
            },
        }
    )


def errors_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text.encode(), "/p/policy.yaml")
    return [f"{issue.path}: {issue.message}" for issue in raised.value.issues]


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("reason_code", ("reason_code",)),
        ("items[*].sku", ("items", None, "sku")),
        ("shipping.country", ("shipping", "country")),
        ("item_ids[*]", ("item_ids", None)),
        ('filters["a.b"][*]', ("filters", "a.b", None)),
        ("Größe", ("Größe",)),
    ],
)
def test_a_pattern_is_read_into_steps_and_written_back(text: str, steps: tuple[str | None, ...]) -> None:
    parsed = parse_path(text)
    assert parsed.steps == steps
    assert pattern_of(format_path([0 if step is None else step for step in steps])) == text


@pytest.mark.parametrize("text", ["items[2].sku", ".x", "a..b", "a[*", "", "a[*]]"])
def test_a_malformed_pattern_is_refused_with_why(text: str) -> None:
    with pytest.raises(ValueError):
        parse_path(text)


def test_labels_are_the_policys_patterns_never_an_index_or_a_models_key() -> None:
    known = frozenset({"items[*].sku", "items", "note"})
    assert label_for("items[12].sku", known) == "items[*].sku"
    assert label_for('items[3]["made.up"]', known) == "items"
    assert label_for("invented", known) is None


def test_paths_the_schema_allows_load_with_the_schemas_required_as_default() -> None:
    loaded = parse_policy(
        policy({"items[*].sku": "skus", "shipping.country": "skus", "items[*].tags[*]": "skus"}).encode(),
        "/p/policy.yaml",
    )
    bindings = {b.name: b for b in loaded.tools["create_order"].arguments}
    assert bindings["items[*].sku"].required is True  # items and sku are both required
    assert bindings["shipping.country"].required is False  # shipping is optional: absent is no problem
    assert bindings["items[*].tags[*]"].required is False


@pytest.mark.parametrize(
    ("binding", "error"),
    [
        ("shipping[*]", "shipping[*]: [*] after shipping, which the schema types object"),
        ("items[*].skew", "items[*].skew: the schema lists no 'skew' in items[*]; its properties: sku, tags"),
        ("note[*]", "note[*]: [*] after note, which the schema types string"),
        ("items.sku", "items.sku: 'sku' is looked for in items, which the schema types array"),
        ("shipping.zip", "shipping.zip: the schema lists no 'zip' in shipping; its properties: country"),
        ("items[1].sku", "a binding names every element ([*]), not one index ([1])"),
    ],
)
def test_a_path_that_names_nothing_the_schema_allows_is_a_load_error_naming_it(binding: str, error: str) -> None:
    found = errors_of(policy({binding: "skus"}))
    assert len(found) == 1 and error in found[0], found


def test_without_a_schema_any_well_formed_path_loads() -> None:
    text = textwrap.dedent("""
        sources: {local: {file: sets.yaml}}
        value_sets: {skus: {source: local}}
        tools:
          t:
            arguments: {"lines[*].sku": {value_set: skus}}
        """)
    assert parse_policy(text.encode(), "/p/policy.yaml").tools["t"].arguments[0].path.steps == ("lines", None, "sku")


def test_locating_reports_what_is_absent_misshapen_and_past_the_limit() -> None:
    located = locate({"items": [{"sku": "A"}, {"qty": 2}, 7, {"sku": "B"}]}, parse_path("items[*].sku"), 3)
    assert [(format_path(where), value) for where, value in located.found] == [("items[0].sku", "A")]
    assert [format_path(where) for where in located.missing] == ["items[1].sku"]
    assert [(format_path(where), value, needed) for where, value, needed in located.misshapen] == [
        ("items[2]", 7, "an object")
    ]
    assert located.unchecked == 1


def test_an_operations_key_names_top_level_arguments_only() -> None:
    text = policy({"items[*].sku": "skus"})
    document = json.loads(text)
    document["tools"]["create_order"]["side_effect"] = {"same_operation": ["items[*].sku"]}
    assert errors_of(json.dumps(document)) == [
        "tools.create_order.side_effect.same_operation: 'items[*].sku': name a top-level argument (its whole "
        "value counts)"
    ]


def test_a_quoted_top_level_name_is_the_key_it_quotes_never_the_quoted_text() -> None:
    """`["a.b"]` binds the argument a.b: a call carrying a key spelt `["a.b"]` must not stand in for it."""
    from argwatch.server.policy.model import Failure
    from argwatch.server.sets.snapshot import SetReading
    from argwatch.server.verdict.findings import ProblemCode
    from argwatch.server.verdict.set_checks import all_in_sets, check_arguments, members_plan
    from tests.snapshots import make_snapshot

    text = json.dumps(
        {
            "sources": {"local": {"file": "sets.yaml"}},
            "value_sets": {"s": {"source": "local"}},
            "tools": {"t": {"arguments": {'["a.b"]': {"value_set": "s"}}}},
        }
    )
    tool = parse_policy(text.encode(), "/p/policy.yaml").tools["t"]
    readings = {"s": SetReading(make_snapshot("s", 1, ["OK"], received_at=0.0), 0.0, False)}

    def judged(arguments: dict[str, object]) -> list[tuple[ProblemCode, str]]:
        fast = all_in_sets(members_plan(tool), arguments, readings)
        result = fast or check_arguments(tool, arguments, readings, {"s": Failure.OPEN})
        return [(problem.code, problem.argument) for problem in result.problems]

    assert judged({"a.b": "OK"}) == []
    assert judged({"a.b": "NOPE", '["a.b"]': "OK"}) == [(ProblemCode.OUT_OF_SET, '["a.b"]')]
    assert judged({'["a.b"]': "OK"}) == [(ProblemCode.MISSING_REQUIRED, '["a.b"]')]
