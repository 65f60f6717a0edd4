"""Whether a binding's path names something its tool's schema allows, and whether the schema requires it.

Checked at load, so that `item[*].sku` (a typo) or `[*]` on a string argument
is an error naming the path, never a binding that finds nothing to check and
so checks nothing. Local `$ref`s are followed (schema_surface.resolve_ref);
`anyOf`/`oneOf`/`allOf` allow a step if any branch does. A schema that says
nothing at some depth (`true`, no `properties` and open additional
properties) allows whatever follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from argwatch.server.policy.arg_paths import EVERY, ArgPath, format_path, pattern_of
from argwatch.server.policy.schema_surface import resolve_ref

_OPEN: Mapping[str, Any] = {}
_MAX_BRANCHES = 64  # alternatives followed per step: a schema's anyOf may list thousands


class PathInSchema(NamedTuple):
    """A path checked against a schema: what is wrong ("" if nothing) and whether every step is required."""

    error: str
    required: bool


def check_path(path: ArgPath, schema: Mapping[str, Any] | bool | None) -> PathInSchema:
    """`path` walked through `schema` (None: the tool has none, and any path is allowed)."""
    if schema is None or schema is True:
        return PathInSchema("", True)
    if schema is False:
        return PathInSchema(f"{path.pattern}: the tool's schema is false, so no call has it", False)
    root = schema
    nodes: list[Mapping[str, Any]] = [schema]  # a `true` subschema becomes _OPEN as it is reached
    required = True
    walked: list[str | int] = []
    for step in path.steps:
        nodes = _alternatives(nodes, root)
        if not nodes:  # some branch says nothing: anything may follow
            return PathInSchema("", required)
        where = pattern_of(format_path(walked)) or "the arguments"
        if step is EVERY:
            arrays = [node for node in nodes if _may_be(node, "array")]
            if not arrays:
                return PathInSchema(f"{path.pattern}: [*] after {where}, which the schema types {_types(nodes)}", False)
            nodes = [_items(node) for node in arrays]
            walked.append(0)
            continue
        objects = [node for node in nodes if _may_be(node, "object")]
        if not objects:
            return PathInSchema(
                f"{path.pattern}: {step!r} is looked for in {where}, which the schema types {_types(nodes)}", False
            )
        found = [child for node in objects if (child := _property(node, step, nested=bool(walked))) is not None]
        if not found:
            known = sorted({name for node in objects for name in _named(node)})
            listed = f"; its properties: {', '.join(known)}" if known else ""
            return PathInSchema(
                f"{path.pattern}: the schema lists no {step!r} in {where}{listed} (list it there to bind it)", False
            )
        required = required and any(step in _required(node) for node in objects)
        nodes = [child if isinstance(child, Mapping) else _OPEN for child in found]
        walked.append(step)
    return PathInSchema("", required)


def _alternatives(nodes: list[Mapping[str, Any]], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Each node with its `$ref` followed and its anyOf/oneOf/allOf branches listed beside it; [] when
    one of them constrains nothing (so anything may follow)."""
    found: list[Mapping[str, Any]] = []
    pending = list(nodes)
    while pending and len(found) < _MAX_BRANCHES:
        node = pending.pop()
        if node is _OPEN:
            return []
        if not isinstance(node, Mapping):
            continue
        node = resolve_ref(node, root)
        branches = [b for keyword in ("anyOf", "oneOf", "allOf") for b in _listed(node.get(keyword))]
        if branches and not _says_more_than(node):
            pending.extend(branches)
            continue
        pending.extend(branches)
        found.append(node)
    return found if any(_says_more_than(node) for node in found) else []


def _listed(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _says_more_than(node: Mapping[str, Any]) -> bool:
    return any(key in node for key in ("type", "properties", "items", "additionalProperties", "prefixItems"))


def _may_be(node: Mapping[str, Any], kind: str) -> bool:
    types = node.get("type")
    if types is None:
        return True
    listed = types if isinstance(types, list) else [types]
    return kind in listed


def _types(nodes: list[Mapping[str, Any]]) -> str:
    kinds = sorted({str(kind) for node in nodes for kind in _listed_types(node)})
    return " or ".join(kinds) if kinds else "as something else"


def _listed_types(node: Mapping[str, Any]) -> list[object]:
    types = node.get("type")
    return types if isinstance(types, list) else [types] if types is not None else []


def _items(node: Mapping[str, Any]) -> Mapping[str, Any]:
    items = node.get("items")
    return items if isinstance(items, Mapping) else _OPEN


def _property(node: Mapping[str, Any], name: str, nested: bool) -> object | None:
    properties = node.get("properties")
    if isinstance(properties, Mapping) and name in properties:
        found: object = properties[name]
        return None if found is False else found  # `false`: the schema forbids it
    additional = node.get("additionalProperties", node.get("unevaluatedProperties", True))
    if additional is False:
        return None
    if nested and "properties" in node and additional is True and not node.get("patternProperties"):
        # Listed properties and open additional ones: a nested name it does not list is most likely a typo.
        # (A top-level one stays allowed, as before paths: a record's id is often left out of the schema.)
        return None
    return additional if isinstance(additional, Mapping) else _OPEN


def _named(node: Mapping[str, Any]) -> list[str]:
    properties = node.get("properties")
    return [name for name in properties if isinstance(name, str)] if isinstance(properties, Mapping) else []


def _required(node: Mapping[str, Any]) -> list[str]:
    required = node.get("required")
    return [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
