"""The fast readers a large policy loads through give the very answers of the checked ones they stand in for.

- A schema's metaschema check runs in Rust (schema_compile.check_schema); jsonschema's
  own check, with the policy's formats, is the reference.
- A YAML document is read by libyaml with a one-pass builder (strict_yaml._load_clean);
  the pure-Python reader with its marks and duplicate-key check is the reference.
- A schema's patterns are found without their paths (linear_regex.pattern_texts);
  patterns_in, which says where each is, is the reference.
"""

from __future__ import annotations

import gc
import json
import os
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from argwatch.server.policy import strict_yaml
from argwatch.server.policy.collector_pause import paused_collector
from argwatch.server.policy.linear_regex import pattern_texts, patterns_in
from argwatch.server.policy.schema_compile import _POLICY_FORMATS, check_schema

CATALOGUES = os.path.join(os.path.dirname(__file__), "..", "data", "catalogues")
REFERENCE = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=_POLICY_FORMATS)


def real_schemas() -> list[Any]:
    with open(os.path.join(CATALOGUES, "frameworks.json")) as handle:
        schemas = [tool["schema"] for tool in json.load(handle)["tools"]]
    with open(os.path.join(CATALOGUES, "mcp_reference_servers.json")) as handle:
        servers = json.load(handle)["servers"]
    schemas += [tool["inputSchema"] for server in servers.values() for tool in server["tools"]]
    return schemas


def rust_says_valid(schema: Any) -> bool:
    try:
        check_schema(schema)
    except SchemaError:
        return False
    return True


def test_every_real_schema_gets_the_reference_verdict() -> None:
    schemas = real_schemas()
    assert len(schemas) > 390
    for schema in schemas:
        assert rust_says_valid(schema) == REFERENCE.is_valid(schema), json.dumps(schema)[:200]


# Strings where the formats the metaschema names (uri, uri-reference, regex) and $anchor's pattern decide.
TRICKY = [
    "", "#", "#/a", "#/$defs/a b", "a b", "http://x", "urn:a:b", "://", "http://[::1]/", "http://[::1",
    "%zz", "a%20b", "x:y", "\u00e9", "http://ex.com/\u00e9", "./a", "a\\b", "a|b", "`", "{x}", "1:a", "-x:y",
    "(a", "(a)\\1", "(?=a)", "\\p{L}", "[", "a{2,}", "(?P<n>a)", "_a", "1a", "a.b-c",
]  # fmt: skip
KEYWORDS = [
    "type", "properties", "items", "enum", "const", "minimum", "maxLength", "required", "pattern",
    "patternProperties", "additionalProperties", "$id", "$ref", "$schema", "$anchor", "$dynamicRef",
    "$defs", "anyOf", "format", "$vocabulary", "prefixItems", "dependentRequired",
]  # fmt: skip
leaves = st.one_of(
    st.sampled_from(TRICKY),
    st.sampled_from(["string", "object", "integer", "strng", "null"]),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


def schema_like(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from(KEYWORDS) | st.sampled_from(TRICKY), children, max_size=4),
        st.lists(children, max_size=3),
    )


schemas = st.recursive(leaves, schema_like, max_leaves=12).filter(lambda drawn: isinstance(drawn, dict | bool))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_a_drawn_schema_gets_the_reference_verdict(schema: Any) -> None:
    assert rust_says_valid(schema) == REFERENCE.is_valid(schema)


def test_a_refused_schema_is_refused_in_jsonschemas_words_with_where() -> None:
    with pytest.raises(SchemaError) as refused:
        check_schema({"properties": {"a": {"type": "strng"}}})
    assert refused.value.json_path == "$.properties.a.type"


# YAML: documents made of what policies hold, and of what the checked reader refuses or treats specially.
keys = st.sampled_from(["a", "b", "mode", "1", "true", "yes", "~", "x y", "<<", "=", "0x1F", "2001-12-14"])
scalars = st.one_of(
    st.text(max_size=6),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["yes", "off", "~", "0o17", "1_000", ".inf", "1e3", "2001-12-14", "=", "<<"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=10,
)
# Raw lines spliced in: anchors and aliases, merge keys, tags, keys given twice, a second document.
SPLICES = [
    "x: &a 1\ny: *a\n", "base: &b {k: 1}\nmore:\n  <<: *b\n", "m:\n  <<: {k: 2}\n", "s: !!set {a, b}\n",
    "t: !!binary aGVsbG8=\n", "a: 1\na: 2\n", "? [1, 2]\n: v\n", "---\nx: 1\n", "o: !!omap [{a: 1}]\n",
    "q: !custom 1\n", "k: {a: 1, a: 1}\n", "1: a\n1.0: b\n", "true: a\nyes: b\n", "\t\n", "x: \"\\x00\"\n",
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.booleans(), st.lists(st.sampled_from(SPLICES), max_size=2), st.integers(0, 3))
# libyaml read a line of a tab inside a flow list that the checked reader refuses (found in CI).
@example({"a": [], "b": "", "mode": {"a": "", "b": ["", None, 1e12], "mode": ["", "", ""]}}, True, ["\t\n"], 1)
def test_a_document_read_fast_reads_as_the_checked_reader_reads_it(
    document: Any, flow: bool, splices: list[str], where: int
) -> None:
    lines = yaml.safe_dump({"doc": document}, default_flow_style=flow).splitlines(keepends=True)
    for splice in splices:
        lines.insert(min(where, len(lines)), splice)
    text = "".join(lines)
    fast = strict_yaml._load_clean(text)
    try:
        checked: tuple[Any, Any] | Exception = strict_yaml._load_checked(text)
    except (yaml.YAMLError, strict_yaml.DuplicateKeys) as refused:
        checked = refused
    if fast is None:
        return  # load_yaml_marked then reads it with the checked reader: the same answer by construction
    assert not isinstance(checked, Exception), f"read fast, refused checked: {text!r}"
    assert repr(fast[0]) == repr(checked[0])  # repr: 1, 1.0 and True are equal, and must not pass as equal
    assert dict(fast[1]) == dict(checked[1])


def test_an_alias_bomb_is_refused_without_being_expanded() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(12)
    )
    assert strict_yaml._load_clean(bomb) is None  # 9**13 items were it expanded
    with pytest.raises(yaml.YAMLError, match="aliases"):
        strict_yaml.load_yaml_marked(bomb)


def test_a_policy_nested_too_deeply_is_a_yaml_error_not_a_crash() -> None:
    deep = "".join("  " * level + "k:\n" for level in range(1200)) + "  " * 1200 + "v\n"
    with pytest.raises(yaml.YAMLError):
        strict_yaml.load_yaml_marked(deep)


def test_marks_are_found_when_asked_for() -> None:
    document, marks = strict_yaml.load_yaml_marked("tools:\n  refund:\n    mode: reject\n")
    assert document == {"tools": {"refund": {"mode": "reject"}}}
    assert marks["tools.refund.mode"] == (3, 5)
    assert "tools.other" not in marks


def test_overlapping_pauses_resume_the_collector_once_the_last_ends() -> None:
    assert gc.isenabled()
    with paused_collector():
        with paused_collector():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_collector():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_schemas_patterns_are_found_without_their_paths_at_any_depth() -> None:
    schema = {
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}, "pattern": {"type": "string"}},
        "patternProperties": {"^x-": {"items": [{"pattern": "a+"}]}},
        "allOf": [{"not": {"pattern": "b*"}}],
    }
    assert sorted(pattern_texts(schema)) == ["^[A-Z]+$", "^x-", "a+", "b*"]
    assert sorted(pattern_texts(schema)) == sorted(pattern for _, pattern in patterns_in(schema))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["pattern", "a+", "(a|b)*c", "x"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["pattern", "patternProperties", "properties", "items", "a"]), inner, max_size=4
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_drawn_schemas_patterns_are_found_without_their_paths(schema: Any) -> None:
    assert sorted(pattern_texts(schema)) == sorted(pattern for _, pattern in patterns_in(schema))
