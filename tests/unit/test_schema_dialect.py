"""Tool schemas as agents write them: boolean schemas, Unicode property escapes, and the policy's choice on `format`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.model import Policy
from argwatch.server.repair.tool_export import export_tool
from argwatch.server.verdict.findings import ProblemCode
from argwatch.server.verdict.schema_checks import schema_problems


def policy(text: str, folder: str = "/tmp") -> Policy:
    return parse_policy(text.encode(), os.path.join(folder, "policy.yaml"))


def problems(policy: Policy, tool: str, arguments: Mapping[str, object]) -> list[tuple[ProblemCode, str]]:
    validator = policy.tools[tool].schema_validator
    return [(p.code, p.argument) for p in schema_problems(validator, arguments)]


BOOLEANS = """
tools:
  anything: {schema: true}
  nothing: {schema: false}
  no_notes:
    schema:
      type: object
      properties:
        order_id: {type: string}
        internal_note: false
        lines: {type: array, prefixItems: [true], items: false}
"""


def test_schema_true_takes_any_arguments_and_false_takes_no_call() -> None:
    loaded = policy(BOOLEANS)
    assert problems(loaded, "anything", {"x": [1, {"y": None}]}) == []
    assert problems(loaded, "nothing", {}) == [(ProblemCode.OUT_OF_RANGE, "")]
    (refused,) = schema_problems(loaded.tools["nothing"].schema_validator, {"a": 1})
    assert refused.message == "arguments: this tool's schema is false, so no call of it is valid"


def test_a_false_subschema_names_the_argument_not_to_send() -> None:
    loaded = policy(BOOLEANS)
    assert problems(loaded, "no_notes", {"order_id": "o1", "lines": ["a"]}) == []
    # jsonschema reports a nested `false` without a path; argwatch names where it stands.
    assert problems(loaded, "no_notes", {"order_id": "o1", "internal_note": "x", "lines": ["a", "b"]}) == [
        (ProblemCode.UNEXPECTED_ARGUMENT, "internal_note"),
        (ProblemCode.OUT_OF_RANGE, "lines[1]"),
    ]


def test_boolean_schemas_come_in_through_tool_definitions_and_export_as_objects(tmp_path: Path) -> None:
    definitions = [
        {"name": "ping", "description": "no arguments checked", "inputSchema": True},
        {"name": "retired", "description": "takes no call", "inputSchema": False},
    ]
    (tmp_path / "tools.json").write_text(json.dumps({"tools": definitions}))
    loaded = policy("tool_definitions: [tools.json]\n", str(tmp_path))
    assert loaded.tools["ping"].schema is True and loaded.tools["retired"].schema is False
    assert problems(loaded, "ping", {"anything": 1}) == []
    assert problems(loaded, "retired", {}) == [(ProblemCode.OUT_OF_RANGE, "")]
    # Providers want an object schema: `true` is any object, `false` one nothing matches.
    exported = {
        name: export_tool(loaded, loaded.tools[name], lambda _: None, "anthropic") for name in ("ping", "retired")
    }
    assert exported["ping"].definition["input_schema"] == {"type": "object", "properties": {}}
    assert exported["retired"].definition["input_schema"] == {"type": "object", "not": {}, "properties": {}}


def test_a_schema_that_is_neither_a_mapping_nor_a_boolean_is_a_load_error() -> None:
    with pytest.raises(PolicyError) as raised:
        policy("tools:\n  t: {schema: [1, 2]}\n")
    assert [issue.message for issue in raised.value.issues] == ["expected a JSON Schema (a mapping, true or false)"]


UNICODE = r"""
tools:
  greet:
    schema:
      type: object
      properties:
        name: {type: string, pattern: "^\\p{Letter}+$"}
        code: {type: string, pattern: "^\\p{Lu}{3}$"}
      patternProperties:
        "^\\p{Lu}\\p{Ll}*_count$": {type: integer}
"""


def test_unicode_property_escapes_are_accepted_and_checked() -> None:
    loaded = policy(UNICODE)
    assert problems(loaded, "greet", {"name": "Zoë", "code": "ÄÖÜ", "Größe_count": 3}) == []
    assert problems(loaded, "greet", {"name": "Zoë1", "code": "äöü", "Größe_count": "3"}) == [
        (ProblemCode.WRONG_TYPE, "Größe_count"),
        (ProblemCode.OUT_OF_RANGE, "code"),
        (ProblemCode.OUT_OF_RANGE, "name"),
    ]


FORMATS = """
{formats}
tools:
  contact:
    schema:
      type: object
      properties: {{email: {{type: string, format: email}}, day: {{type: string, format: date}}}}
  strict_contact:
    formats: assert
    schema: {{type: object, properties: {{email: {{type: string, format: email}}}}}}
  loose_contact:
    formats: annotate
    schema: {{type: object, properties: {{email: {{type: string, format: email}}}}}}
"""
BAD = {"email": "not an address", "day": "31/12/2026"}


def test_formats_are_asserted_by_default() -> None:
    loaded = policy(FORMATS.format(formats=""))
    assert loaded.assert_formats is True
    assert problems(loaded, "contact", BAD) == [(ProblemCode.OUT_OF_RANGE, "day"), (ProblemCode.OUT_OF_RANGE, "email")]
    assert problems(loaded, "loose_contact", BAD) == []  # the tool's own choice stands


def test_formats_annotate_makes_format_a_note_that_checks_nothing() -> None:
    loaded = policy(FORMATS.format(formats="formats: annotate"))
    assert loaded.assert_formats is False
    assert problems(loaded, "contact", BAD) == []
    assert problems(loaded, "contact", {"email": 7}) == [(ProblemCode.WRONG_TYPE, "email")]  # the type still holds
    assert problems(loaded, "strict_contact", BAD) == [(ProblemCode.OUT_OF_RANGE, "email")]


def test_an_unknown_formats_choice_is_a_load_error() -> None:
    with pytest.raises(PolicyError) as raised:
        policy(FORMATS.format(formats="formats: sometimes"))
    assert [issue.message for issue in raised.value.issues] == ["expected assert or annotate, got 'sometimes'"]


def test_policy_check_warns_of_an_asserted_format_no_checker_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from argwatch.server.cli import main

    path = tmp_path / "policy.yaml"
    path.write_text(
        "tools:\n  t:\n    schema:\n      type: object\n"
        "      properties: {d: {type: string, format: date_time}, u: {type: string, format: uri}}\n"
    )
    assert main(["policy", "check", str(path)]) == 0  # a warning, not an error: the spec makes it an annotation
    warned = capsys.readouterr().err
    assert "format 'date_time' has no checker here, so any text passes" in warned
    assert "'uri'" not in warned  # uri has its checker
