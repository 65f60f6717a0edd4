"""A tool's JSON Schema compiled at load, for both validators the schema checks use (verdict/schema_checks.py).

The schema itself is checked first, its patterns by the linear-time engine that
will run them; a schema with a mistake is a load error naming where it is.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from argwatch.server.policy.linear_regex import LINEAR, cannot_run, is_regex, use_in_jsonschema

# The logger name the schema checks have always logged under, so log filters set for it still apply.
log = logging.getLogger("argwatch.server.verdict.schema_checks")


def _a_linear_regex(instance: object) -> bool:
    return not isinstance(instance, str) or is_regex(instance)


FORMATS = copy.copy(Draft202012Validator.FORMAT_CHECKER)
FORMATS.checkers = dict(FORMATS.checkers)  # our own table: the library's stays as it is
FORMATS.checks("regex")(_a_linear_regex)
_POLICY_FORMATS = copy.copy(FORMATS)
_POLICY_FORMATS.checkers = dict(FORMATS.checkers)
_POLICY_FORMATS.checks("regex")(lambda instance: not isinstance(instance, str) or not cannot_run(instance))

# The metaschema check, in Rust: jsonschema's own (check_schema) took 4.7 ms a schema of the real catalogues
# in tests/data/catalogues, and 10,000 tools a minute. It asserts the formats the metaschema names, as
# _POLICY_FORMATS does, with the same regex verdict; tests/unit/test_fast_readers.py holds the two to
# the same answers. jsonschema's check still words the error of a schema this one refuses.
_METASCHEMA = jsonschema_rs.Draft202012Validator(
    Draft202012Validator.META_SCHEMA,
    validate_formats=True,
    formats={"regex": lambda instance: not cannot_run(instance)},
    offline=True,
)


class CompiledSchema:
    """A tool's schema, compiled for both validators (read-only after load). The full check, and where
    each enum is, are made on the first call that needs them (a call the fast check refuses, or every call
    where it cannot take the schema): at load they were most of a large catalogue's time, for tools most
    of which never see a bad call."""

    __slots__ = ("_enums", "_full", "_schema", "assert_formats", "digest", "fast")

    def __init__(self, schema: Mapping[str, Any] | bool, fast: Any, assert_formats: bool, digest: bytes) -> None:
        self._schema = schema
        self.fast = fast  # jsonschema_rs.Draft202012Validator, or None where it cannot take the schema
        self.assert_formats = assert_formats
        # What it was compiled from (schema_digest): a reload reuses it for a tool whose schema is unchanged.
        self.digest = digest
        self._full: Draft202012Validator | None = None
        self._enums: Mapping[int, str] | None = None

    @property
    def full(self) -> Draft202012Validator:
        """The check that lists problems, and decides where the fast one cannot."""
        if self._full is None:
            formats = FORMATS if self.assert_formats else None
            self._full = Draft202012Validator(_located_falses(self._schema), format_checker=formats)
        return self._full

    @property
    def enums(self) -> Mapping[int, str]:
        """Where each `enum` is in the schema (a JSON pointer), by the id of its list: the full check reports
        a miss with that very list, even reached through a $ref, so a problem can name the enum it missed."""
        if self._enums is None:
            self._enums = MappingProxyType(enum_pointers(self._schema))
        return self._enums


def schema_digest(schema: Mapping[str, Any] | bool, assert_formats: bool) -> bytes:
    """A digest of the schema exactly as read, and its format setting: repr tells 1, 1.0 and True apart, and
    a key 1 from a key "1", which JSON would not."""
    return hashlib.sha256(f"{int(assert_formats)}{schema!r}".encode(errors="surrogatepass")).digest()


def compile_schema(
    schema: Mapping[str, Any] | bool,
    *,
    assert_formats: bool = True,
    reuse: Mapping[bytes, CompiledSchema] | None = None,
) -> CompiledSchema:
    """Both validators for `schema`; raises SchemaError (with .json_path) when the schema itself is invalid.

    With `assert_formats` (the policy's `formats: assert`) a value that breaks its `format` is a
    problem; without, `format` is the annotation 2020-12 makes it by default, and checks nothing.
    """
    digest = schema_digest(schema, assert_formats)
    if reuse is not None and (compiled := reuse.get(digest)) is not None:
        return compiled
    # "Is this a regex?" is asked of the engine that will run it: Python's re would refuse \p{Letter},
    # which the linear engine runs, and accept lookarounds, which it cannot.
    # The schema's own patterns ("is this a regex?") are the policy's: the compiled cache may keep them.
    check_schema(schema)
    use_in_jsonschema()  # the full check's regex searches run in linear time too (linear_regex.py)
    try:
        # offline: a remote $ref is never fetched, at load or per call; LINEAR: patterns never backtrack.
        fast = jsonschema_rs.Draft202012Validator(
            schema if isinstance(schema, bool) else dict(schema),
            validate_formats=assert_formats,
            offline=True,
            pattern_options=LINEAR,
        )
    except Exception as error:  # a pattern its regex engine rejects, a reference it cannot resolve offline
        log.info("schema: the fast check cannot take it (%s); every call uses the full check", error)
        fast = None
    return CompiledSchema(schema, fast, assert_formats, digest)


def check_schema(schema: Mapping[str, Any] | bool) -> None:
    """Raises SchemaError, saying where, when `schema` is not a valid 2020-12 JSON Schema."""
    if _METASCHEMA.is_valid(schema if isinstance(schema, bool) else dict(schema)):
        return
    Draft202012Validator.check_schema(schema, format_checker=_POLICY_FORMATS)
    # Refused by one and not the other (never seen): refused, in the Rust check's words.
    error = next(iter(_METASCHEMA.iter_errors(schema if isinstance(schema, bool) else dict(schema))))
    raise SchemaError(error.message, path=list(error.instance_path))


def enum_pointers(schema: object) -> dict[int, str]:
    """Each enum list in `schema`, by id, with its JSON pointer; the lists are the ones the full check holds
    (_located_falses copies the mappings around them, never an enum)."""
    found: dict[int, str] = {}
    stack: list[tuple[object, str]] = [(schema, "")]
    while stack:  # a loop, not recursion: a schema may be nested as deeply as its YAML allows
        node, pointer = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                where = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
                if key == "enum" and isinstance(value, list):
                    found.setdefault(id(value), where)
                else:
                    stack.append((value, where))
        elif isinstance(node, list):
            stack.extend((item, f"{pointer}/{index}") for index, item in enumerate(node))
    return found


# Keywords whose values are subschemas. jsonschema (4.26) reports a nested `false` with no path, so
# the full check sees each as its equal `{"not": {}}`, whose errors say where. additionalProperties
# and unevaluatedProperties stay `false`: their errors name the unexpected keys already.
_ONE_SCHEMA = {"items", "contains", "propertyNames", "not", "if", "then", "else", "unevaluatedItems"}
_SCHEMA_LISTS = {"prefixItems", "allOf", "anyOf", "oneOf"}
_SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
_FALSE: dict[str, Any] = {"not": {}}


def _located_falses(schema: object) -> Any:
    if not isinstance(schema, dict):
        return schema
    copied: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ONE_SCHEMA:
            value = _FALSE if value is False else _located_falses(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [_FALSE if item is False else _located_falses(item) for item in value]
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _FALSE if sub is False else _located_falses(sub) for name, sub in value.items()}
        copied[key] = value
    return copied


def schema_error_location(error: SchemaError) -> str:
    return f"{error.message} (at {error.json_path})"
