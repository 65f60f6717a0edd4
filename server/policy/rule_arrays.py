"""A rule's reads through arrays, typed at load: its `each:`, the element paths it reads and their declared types."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from argwatch.server.policy.arg_paths import EVERY, parse_path
from argwatch.server.policy.model import ArrayReads, ReadNode, Steps
from argwatch.server.policy.rule_reads import pattern, rule_reads
from argwatch.server.policy.schema_surface import resolve_ref

# A macro or an index: the ways an expression reaches into a list.
_WALKS = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(|\[")
# CEL's macros whose time grows with the square of the list, in the library version pinned (cel-rust #340).
_SQUARES = re.compile(r"\.\s*(?:map|filter)\s*\(")
# The variable an `each` rule's expression reads the current element as.
EACH_VARIABLE = "item"


def read_each(value: object) -> Steps:
    """`each: items[*]` as steps; ValueError says what is wrong."""
    if not isinstance(value, str):
        raise ValueError(f"expected an argument path ending in [*] (items[*], orders[*].lines[*]), got {value!r}")
    steps = parse_path(value).steps
    if steps[-1] is not EVERY:
        raise ValueError(f"{value!r}: each names every element of an array, so it ends in [*] (items[*])")
    return steps


def each_reads_whole(expression: str, each: Steps, types: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Why an `each` rule may not read an argument it names with `args.`: the list it runs over, or any array
    or object. CEL converts every variable on every evaluation, and an each rule is evaluated once per
    element, so a whole list beside each element costs the square of its length on the event loop (and is
    not cut to limits.max_elements). A rule over the whole list is written without `each`."""
    errors = []
    for name in sorted(set(_ARGUMENT.findall(expression))):
        kinds = set(types.get(name, ()))
        if name == each[0] or kinds & {"array", "object"}:
            what = "the list it runs over" if name == each[0] else ("an array" if "array" in kinds else "an object")
            errors.append(
                f"an each rule reads its element as {EACH_VARIABLE} and plain arguments; args.{name} is {what}: "
                "read it in a rule of its own, without each"
            )
    return errors


_ARGUMENT = re.compile(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)")


def array_reads(
    expression: str,
    each: Steps,
    declared: Mapping[str, tuple[str, ...]],
    schema: Mapping[str, Any] | bool | None,
    strings: set[str],
) -> tuple[ArrayReads | None, list[str]]:
    """What the rule reads through arrays, each element path typed; and, for each path whose type nothing
    declares, why that is an error. None when it reads no array and calls no sum()."""
    reads = rule_reads(expression, (EACH_VARIABLE, each) if each else None)
    if not reads.followed and (each or _WALKS.search(expression)):
        # An element field it reads could go untyped: refuse rather than guess.
        return None, [
            "cannot tell which element fields this expression reads; write them as i.field within all, "
            "exists, exists_one, map or filter"
        ]
    if not (each or reads.elements or reads.walked or reads.record_lists or reads.sums):
        return None, []
    by_steps = {parse_path(name).steps: kinds for name, kinds in declared.items()}
    types: dict[Steps, tuple[str, ...]] = {}
    errors = []
    for text in sorted(reads.elements):
        steps = parse_path(text).steps
        kinds = by_steps.get(steps) or _schema_kinds(schema, steps) or (("string",) if text in strings else None)
        if kinds is None:
            errors.append(
                f"reads {text}, whose JSON type nothing declares: type it in the tool's schema (items.properties), "
                f"or add types: {{{text!r}: integer}} (say) to the rule; CEL compares values of different types as "
                f'unequal, so a value sent as "5" would not equal 5'
            )
        else:
            types[steps] = kinds
    walked = {parse_path(text).steps for text in reads.walked}
    for steps in (*types, *walked, each):
        walked.update(steps[:index] for index, step in enumerate(steps) if step is EVERY)
    return (
        ArrayReads(
            each=each,
            types=types,
            walked=tuple(sorted(walked, key=pattern)),
            record_lists=tuple(sorted(reads.record_lists, key=repr)),
            sums=reads.sums,
            squares=bool(_SQUARES.search(expression)),
            plan=_plan(types, walked),
        ),
        errors,
    )


class _Node:
    def __init__(self) -> None:
        self.kinds: tuple[str, ...] = ()
        self.fields: dict[str, _Node] = {}
        self.elements: _Node | None = None

    def at(self, steps: Steps) -> _Node:
        node = self
        for step in steps:
            if step is EVERY:
                node.elements = node.elements or _Node()
                node = node.elements
            else:
                node = node.fields.setdefault(step, _Node())
        return node

    def frozen(self) -> ReadNode:
        return ReadNode(
            self.kinds,
            MappingProxyType({name: node.frozen() for name, node in self.fields.items()}),
            self.elements.frozen() if self.elements else None,
        )


def _plan(types: Mapping[Steps, tuple[str, ...]], walked: set[Steps]) -> Mapping[str, ReadNode]:
    root = _Node()
    for steps, kinds in types.items():
        root.at(steps).kinds = kinds
    for steps in walked:
        node = root.at(steps)
        node.elements = node.elements or _Node()
    return MappingProxyType({name: node.frozen() for name, node in root.fields.items()})


def split_types(
    declared: Mapping[str, tuple[str, ...]],
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]], list[str]]:
    """A rule's `types:` as (top-level arguments, paths such as items[*].quantity, errors for malformed paths)."""
    top: dict[str, tuple[str, ...]] = {}
    nested: dict[str, tuple[str, ...]] = {}
    errors = []
    for name, kinds in declared.items():
        try:
            path = parse_path(name)
        except ValueError as error:
            errors.append(str(error))
            continue
        (nested if path.nested else top)[name] = kinds
    return top, nested, errors


def _schema_kinds(schema: Mapping[str, Any] | bool | None, steps: Steps) -> tuple[str, ...] | None:
    """The JSON types the tool's schema gives the path (properties by name, `items` for [*]), $refs followed."""
    if not isinstance(schema, Mapping):
        return None
    node: object = schema
    for step in steps:
        if not isinstance(node, Mapping):
            return None
        node = resolve_ref(node, schema)
        if step is EVERY:
            node = node.get("items")
        else:
            properties = node.get("properties")
            node = properties.get(step) if isinstance(properties, Mapping) else None
    if not isinstance(node, Mapping):
        return None
    kinds = resolve_ref(node, schema).get("type")
    if isinstance(kinds, str):
        return (kinds,)
    if isinstance(kinds, list) and kinds and all(isinstance(kind, str) for kind in kinds):
        return tuple(kinds)
    return None
