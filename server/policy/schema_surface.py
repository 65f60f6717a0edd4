"""A tool schema's argument surface: each leaf argument, and what its JSON Schema alone constrains of its value.

Nested objects are walked: a property of an object argument is its own leaf
(`filters.since`), and so is a property of an array's object items
(`lines[*].sku`), and an array's other items (`tags[*]`), in the notation of
bindings (arg_paths.py), so that a leaf is the path a binding would name. An
object argument whose properties are listed is not a leaf itself: its value
is nothing but those properties. Local `$ref`s
(`#/$defs/...`, as pydantic writes MCP schemas) are followed; a remote one is
never fetched, and constrains nothing here.

Schemas imported from `tool_definitions` are third-party text, and a read
token may ask for their walk (Admin.GetCoverage), so the work is bounded:
each subschema is judged once however many `$ref`s reach it (a `$ref` back
into one being judged is a cycle, stopped, and listed as `cycle:<ref>`), and
one tool's walk visits at most MAX_NODES nodes. Past that, the arguments it
has not reached are listed as TOO_COMPLEX, which constrains nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from argwatch.server.policy.arg_paths import format_path, join
from argwatch.server.policy.schema_compile import FORMATS

MAX_DEPTH = 4  # property names walked (an array's `*` is not one); a deeper object is one leaf, judged whole
MAX_HOPS = 16  # $refs followed in a row to find an object's properties (each one a node of the budget)
# Nodes one tool's walk visits: each path walked, each $ref hop, each subschema judged (once, however many
# $refs reach it). Hand-written and generated schemas need hundreds; past it the walk stops.
MAX_NODES = 20_000
TOO_COMPLEX = "schema too complex to assess"
MAX_CONSTRAINTS = 16  # listed per subschema ("..." for the rest): an anyOf may list thousands of formats
CONSTRAINT_CHARS = 80  # a format's name, a $ref, a type list: the schema's own text, clipped
UNCHECKED_FORMAT = " (no checker: not checked)"
_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_LENGTH = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
# Types whose every value is one of a few, so the type itself enumerates them.
_ENUMERATING_TYPES = frozenset({"boolean", "null"})


class Coverage(enum.Enum):
    """How much of an argument's value the policy pins down, weakest first."""

    UNCONSTRAINED = "unconstrained"  # any value passes
    TYPED = "typed"  # only its JSON type (and perhaps a length): any text of that type passes
    CHECKED = "checked"  # its value is checked: a record look-up, a rule, a pattern, a format or a range
    ENUMERATED = "enumerated"  # its value must come from a list: a value set, an enum or const, a boolean

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {kind: rank for rank, kind in enumerate(Coverage)}


def stronger(one: Coverage, other: Coverage) -> Coverage:
    return one if one.rank >= other.rank else other


@dataclass(frozen=True, slots=True)
class SchemaLeaf:
    """One leaf argument of a schema: its path and what the schema constrains of it."""

    path: str
    constraints: tuple[str, ...]
    coverage: Coverage


@dataclass
class Surface:
    """A schema's leaves in the schema's order, the object arguments it walked through, and the nodes it visited."""

    leaves: dict[str, SchemaLeaf] = field(default_factory=dict)
    containers: set[str] = field(default_factory=set)
    nodes: int = 0


def schema_surface(schema: Mapping[str, Any] | bool | None, assert_formats: bool) -> Surface:
    """Every leaf argument of a tool's schema; none for a schema that names no property."""
    if not isinstance(schema, Mapping):
        return Surface()
    walk = _Walk(schema, assert_formats)
    for name, child in (_properties(resolve_ref(schema, schema)) or {}).items():
        walk.walk(child, format_path([str(name)]), 1)
    return walk.surface


def undeclared_arguments(schema: Mapping[str, Any] | bool | None) -> str:
    """Why arguments the schema does not name would pass unchecked; "" when it refuses them."""
    if schema is None:
        return "no schema"
    if schema is True:
        return "the schema is true"
    if schema is False:
        return ""  # no call of the tool is valid
    top = resolve_ref(schema, schema)
    if top.get("additionalProperties") is False or top.get("unevaluatedProperties") is False:
        return ""
    return "additionalProperties is not false"


Judgement = tuple[tuple[str, ...], Coverage]  # what a subschema constrains of a value, and how far
_NOTHING: Judgement = ((), Coverage.UNCONSTRAINED)


class _TooComplex(Exception):
    """The tool's walk has visited MAX_NODES nodes."""


class _Walk:
    """One tool's walk: its budget, and each subschema's judgement, kept by identity (a subschema is a node
    of the parsed schema, which outlives the walk) so that each is judged once."""

    def __init__(self, root: Mapping[str, Any], formats: bool) -> None:
        self.root = root
        self.formats = formats  # with `formats: annotate` a format checks nothing
        self.surface = Surface()
        self.judged: dict[int, Judgement] = {}
        self.open: set[int] = set()  # the subschemas being judged: a $ref to one of them is a cycle

    def spend(self, nodes: int = 1) -> None:
        self.surface.nodes += nodes
        if self.surface.nodes > MAX_NODES:
            self.surface.nodes = MAX_NODES + 1
            raise _TooComplex

    def walk(self, node: object, path: str, depth: int) -> None:
        """One argument: a leaf, judged, or an object whose properties are walked; past the budget, a leaf
        listed as TOO_COMPLEX."""
        surface = self.surface
        try:
            self.spend()
            resolved = self.resolved(node) if isinstance(node, Mapping) else node
            children: Mapping[str, Any] | None = None
            inner = path
            if isinstance(resolved, Mapping) and depth < MAX_DEPTH:
                children = _properties(resolved)
                items = resolved.get("items")
                if not children and isinstance(items, Mapping):
                    children, inner = _properties(self.resolved(items)), f"{path}[*]"
                    if not children:  # items of no listed properties: each one is the leaf (tags[*])
                        path = inner
            if not children:
                constraints, coverage = self.judgement(node)
                surface.leaves[path] = SchemaLeaf(path, constraints, coverage)
                return
        except _TooComplex:
            surface.leaves[path] = SchemaLeaf(path, (TOO_COMPLEX,), Coverage.UNCONSTRAINED)
            return
        surface.containers.add(path)
        for name, child in children.items():  # past the budget, each is listed as TOO_COMPLEX all the same
            self.walk(child, join(inner, str(name)), depth + 1)

    def resolved(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        """resolve_ref, each $ref followed a node of the budget."""
        hops = [0]
        found = resolve_ref(node, self.root, hops)
        self.spend(hops[0])
        return found

    def judgement(self, node: object) -> Judgement:
        """What one subschema constrains of a value, and how far that pins the value down; judged once."""
        if node is False:
            return ("false",), Coverage.ENUMERATED  # nothing is valid: the argument cannot be sent
        if not isinstance(node, Mapping):
            return _NOTHING
        known = self.judged.get(id(node))
        if known is not None:
            return known
        if id(node) in self.open:  # reached again without a $ref (it is one of its own subschemas)
            return _NOTHING
        self.spend()
        self.open.add(id(node))
        try:
            found = self.judge(node)
        finally:
            self.open.discard(id(node))
        self.judged[id(node)] = found
        return found

    def judge(self, node: Mapping[str, Any]) -> Judgement:
        found: list[str] = []
        coverage = Coverage.UNCONSTRAINED
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#"):
            # The target's keywords hold beside the node's own, as 2020-12 reads a $ref: an allOf of the two.
            target = _pointer(self.root, reference[1:])
            if isinstance(target, Mapping) and id(target) in self.open:
                found.append(_clipped(f"cycle:{reference}"))  # stopped here: it constrains nothing
            elif target is not None:
                more, kind = self.judgement(target)
                found += more
                coverage = kind
        for keyword in ("enum", "const"):
            if keyword in node:
                found.append(keyword)
                coverage = Coverage.ENUMERATED
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if isinstance(kinds, list) and kinds:
            found.append(_clipped("type:" + "|".join(str(kind) for kind in kinds)))
            enumerating = set(kinds) <= _ENUMERATING_TYPES
            coverage = stronger(coverage, Coverage.ENUMERATED if enumerating else Coverage.TYPED)
        form = node.get("format")
        if self.formats and isinstance(form, str):
            if form in FORMATS.checkers:  # the gateway's own checker: what it lacks, any text passes
                found.append(_clipped(f"format:{form}"))
                coverage = stronger(coverage, Coverage.CHECKED)
            else:
                found.append(_clipped(f"format:{form}", UNCHECKED_FORMAT))
        if "pattern" in node:
            found.append("pattern")
            coverage = stronger(coverage, Coverage.CHECKED)
        if any(keyword in node for keyword in _RANGE):
            found.append("range")
            coverage = stronger(coverage, Coverage.CHECKED)
        if any(keyword in node for keyword in _LENGTH):
            # Listed, yet no more than typed: a 500-character limit still lets any note through.
            found.append("length")
            coverage = stronger(coverage, Coverage.TYPED)
        for branch in _branches(node, "allOf"):  # every branch holds: the strongest one counts
            more, kind = self.judgement(branch)
            found += more
            coverage = stronger(coverage, kind)
        for keyword in ("anyOf", "oneOf"):  # one branch is enough: the weakest one counts
            judged = [self.judgement(branch) for branch in _branches(node, keyword)]
            if judged:
                found += [constraint for more, _ in judged for constraint in more]
                coverage = stronger(coverage, min((kind for _, kind in judged), key=lambda kind: kind.rank))
        items = node.get("items")
        if isinstance(items, Mapping | bool):
            more, kind = self.judgement(items)
            found += [_clipped(f"items:{constraint}") for constraint in more]
            coverage = stronger(coverage, kind)
        return _bounded(found), coverage


def _bounded(found: list[str]) -> tuple[str, ...]:
    """Each constraint once, at most MAX_CONSTRAINTS of them and "..." for the rest."""
    distinct = tuple(dict.fromkeys(found))
    return distinct if len(distinct) <= MAX_CONSTRAINTS else (*distinct[: MAX_CONSTRAINTS - 1], "...")


def _clipped(text: str, suffix: str = "") -> str:
    return (text if len(text) <= CONSTRAINT_CHARS else text[: CONSTRAINT_CHARS - 1] + "…") + suffix


def _branches(node: Mapping[str, Any], keyword: str) -> list[object]:
    branches = node.get(keyword)
    return list(branches) if isinstance(branches, list) else []


def _properties(node: object) -> Mapping[str, Any] | None:
    properties = node.get("properties") if isinstance(node, Mapping) else None
    return properties if isinstance(properties, Mapping) and properties else None


def resolve_ref(node: Mapping[str, Any], root: Mapping[str, Any], hops: list[int] | None = None) -> Mapping[str, Any]:
    """The node with its local `$ref` followed (its own keywords kept beside the target's, as 2020-12 reads
    them); a remote or broken reference leaves the node as written. `hops` counts the references followed."""
    for _ in range(MAX_HOPS):
        reference = node.get("$ref")
        if not isinstance(reference, str) or not reference.startswith("#"):
            return node
        if hops is not None:
            hops[0] += 1
        target = _pointer(root, reference[1:])
        if not isinstance(target, Mapping):
            return {key: value for key, value in node.items() if key != "$ref"}
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def _pointer(root: Mapping[str, Any], pointer: str) -> object:
    """What a JSON pointer (`/$defs/line`) names in `root`; None for one that names nothing, or an anchor
    (`#name`), which is not looked for."""
    if pointer and not pointer.startswith("/"):
        return None
    found: object = root
    for part in pointer.split("/")[1:] if pointer else ():
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, Mapping):
            found = found.get(key)
        elif isinstance(found, list) and key.isdigit() and int(key) < len(found):
            found = found[int(key)]
        else:
            return None
    return found
