"""A tool schema's argument surface: each leaf argument, and what its JSON Schema alone constrains of its value.

Nested objects are walked: a property of an object argument is its own leaf
(`filters/since`), and so is a property of an array's object items
(`lines/*/sku`), `*` standing for any index as the verdict's paths
(`lines/0/sku`) do. An object argument whose properties are listed is not a
leaf itself: its value is nothing but those properties. Local `$ref`s
(`#/$defs/...`, as pydantic writes MCP schemas) are followed; a remote one is
never fetched, and constrains nothing here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 4  # path segments walked; a deeper object is one leaf, judged by its own keywords
MAX_HOPS = 16  # $refs followed and subschemas entered for one leaf: a cyclic schema ends here
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
    """A schema's leaves in the schema's order, and the object arguments it walked through."""

    leaves: dict[str, SchemaLeaf] = field(default_factory=dict)
    containers: set[str] = field(default_factory=set)


def schema_surface(schema: Mapping[str, Any] | bool | None, assert_formats: bool) -> Surface:
    """Every leaf argument of a tool's schema; none for a schema that names no property."""
    surface = Surface()
    if isinstance(schema, Mapping):
        properties = _properties(_resolved(schema, schema))
        for name, child in (properties or {}).items():
            _walk(child, schema, str(name), 1, assert_formats, surface)
    return surface


def undeclared_arguments(schema: Mapping[str, Any] | bool | None) -> str:
    """Why arguments the schema does not name would pass unchecked; "" when it refuses them."""
    if schema is None:
        return "no schema"
    if schema is True:
        return "the schema is true"
    if schema is False:
        return ""  # no call of the tool is valid
    top = _resolved(schema, schema)
    if top.get("additionalProperties") is False or top.get("unevaluatedProperties") is False:
        return ""
    return "additionalProperties is not false"


def _walk(node: object, root: Mapping[str, Any], path: str, depth: int, formats: bool, surface: Surface) -> None:
    resolved = _resolved(node, root) if isinstance(node, Mapping) else node
    if isinstance(resolved, Mapping) and depth < MAX_DEPTH:
        properties = _properties(resolved)
        items = resolved.get("items")
        item_properties = _properties(_resolved(items, root)) if isinstance(items, Mapping) else None
        if properties:
            surface.containers.add(path)
            for name, child in properties.items():
                _walk(child, root, f"{path}/{name}", depth + 1, formats, surface)
            return
        if item_properties:
            surface.containers.add(path)
            for name, child in item_properties.items():
                _walk(child, root, f"{path}/*/{name}", depth + 1, formats, surface)
            return
    constraints, coverage = _judged(node, root, formats, 0)
    surface.leaves[path] = SchemaLeaf(path, tuple(dict.fromkeys(constraints)), coverage)


def _judged(node: object, root: Mapping[str, Any], formats: bool, hops: int) -> tuple[list[str], Coverage]:
    """What one subschema constrains of a value, and how far that pins the value down."""
    if node is False:
        return ["false"], Coverage.ENUMERATED  # nothing is valid: the argument cannot be sent
    if not isinstance(node, Mapping) or hops > MAX_HOPS:
        return [], Coverage.UNCONSTRAINED
    node = _resolved(node, root)
    found: list[str] = []
    coverage = Coverage.UNCONSTRAINED
    for keyword in ("enum", "const"):
        if keyword in node:
            found.append(keyword)
            coverage = Coverage.ENUMERATED
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list) and kinds:
        found.append("type:" + "|".join(str(kind) for kind in kinds))
        enumerating = set(kinds) <= _ENUMERATING_TYPES
        coverage = stronger(coverage, Coverage.ENUMERATED if enumerating else Coverage.TYPED)
    if formats and isinstance(node.get("format"), str):  # with `formats: annotate` a format checks nothing
        found.append(f"format:{node['format']}")
        coverage = stronger(coverage, Coverage.CHECKED)
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
        more, kind = _judged(branch, root, formats, hops + 1)
        found += more
        coverage = stronger(coverage, kind)
    for keyword in ("anyOf", "oneOf"):  # one branch is enough: the weakest one counts
        judged = [_judged(branch, root, formats, hops + 1) for branch in _branches(node, keyword)]
        if judged:
            found += [constraint for more, _ in judged for constraint in more]
            coverage = stronger(coverage, min((kind for _, kind in judged), key=lambda kind: kind.rank))
    items = node.get("items")
    if isinstance(items, Mapping | bool):
        more, kind = _judged(items, root, formats, hops + 1)
        found += [f"items:{constraint}" for constraint in more]
        coverage = stronger(coverage, kind)
    return found, coverage


def _branches(node: Mapping[str, Any], keyword: str) -> list[object]:
    branches = node.get(keyword)
    return list(branches) if isinstance(branches, list) else []


def _properties(node: object) -> Mapping[str, Any] | None:
    properties = node.get("properties") if isinstance(node, Mapping) else None
    return properties if isinstance(properties, Mapping) and properties else None


def _resolved(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """The node with its local `$ref` followed (its own keywords kept beside the target's, as 2020-12 reads
    them); a remote or broken reference leaves the node as written."""
    for _ in range(MAX_HOPS):
        reference = node.get("$ref")
        if not isinstance(reference, str) or not reference.startswith("#"):
            return node
        target = _pointer(root, reference[1:])
        if not isinstance(target, Mapping):
            return {key: value for key, value in node.items() if key != "$ref"}
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def _pointer(root: Mapping[str, Any], pointer: str) -> object:
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
