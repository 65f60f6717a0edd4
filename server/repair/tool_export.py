"""The policy's tools as model clients describe them (OpenAI, Anthropic, MCP), with enums from today's value sets.

Every argument the policy knows of is there: the schema's properties, the
bound arguments, each record's id argument (a string, required: the look-up
needs it) and the arguments rules read, typed as the rule types them;
`required` is the schema's list, the bound arguments not marked `required:
false`, and the record ids. A bound argument whose set has at most
`repair.list_limit` members gets that set's members as its `enum` (sorted), so
the model is offered exactly what the owning service accepts today; a larger
set, or one whose `disclose` is not `list`, is named in the description
instead. Each definition carries a digest that changes when, and only when,
the definition does: an agent compares it to know when to describe its tools to
the model again, and drift between what the model is offered and what the
service takes is caught where it starts.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from argwatch.server.policy.arg_paths import EVERY, ArgPath, top_of
from argwatch.server.policy.model import Disclosure, Policy, ToolPolicy
from argwatch.server.sets.snapshot import SetReading

FORMATS = ("mcp", "openai", "anthropic")


class ExportedTool(NamedTuple):
    name: str
    definition: dict[str, Any]
    version: str
    readings: tuple[SetReading, ...]  # the sets whose members fill an enum


def export_tool(
    policy: Policy, tool: ToolPolicy, read: Callable[[str], SetReading | None], shape: str = "mcp"
) -> ExportedTool:
    """One tool's definition in `shape` (mcp, openai or anthropic)."""
    schema, readings = _schema(policy, tool, read)
    description = tool.description or f"The {tool.name} tool."
    if shape == "openai":
        definition: dict[str, Any] = {
            "type": "function",
            "function": {"name": tool.name, "description": description, "parameters": schema},
        }
    elif shape == "anthropic":
        definition = {"name": tool.name, "description": description, "input_schema": schema}
    elif shape == "mcp":
        definition = {"name": tool.name, "description": description, "inputSchema": schema}
    else:
        raise ValueError(f"unknown tool definition format {shape!r}: one of {', '.join(FORMATS)}")
    return ExportedTool(tool.name, definition, digest(definition), tuple(readings))


def digest(value: object) -> str:
    """A short, stable digest of a JSON value (keys sorted)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _schema(
    policy: Policy, tool: ToolPolicy, read: Callable[[str], SetReading | None]
) -> tuple[dict[str, Any], list[SetReading]]:
    # Providers want an object schema: `true` is any object, and `false` one no call can match.
    if isinstance(tool.schema, Mapping) and tool.schema:
        schema: dict[str, Any] = copy.deepcopy(dict(tool.schema))
    else:
        schema = {"type": "object", "not": {}} if tool.schema is False else {"type": "object"}
    properties: dict[str, Any] = schema.setdefault("properties", {})
    required: list[str] = list(schema.get("required", []))
    readings: list[SetReading] = []
    limit = policy.repair.list_limit
    for binding in tool.arguments:
        if binding.path.nested:  # items[*].sku: the property inside the schema's own nested shape
            prop, holder = _node_at(schema, binding.path)
        else:
            prop, holder = properties.setdefault(binding.path.top, {}), None
        prop.setdefault("type", "string")
        reading = read(binding.value_set)
        disclose = policy.value_sets[binding.value_set].disclose
        # A scoped set is each caller's own: a definition, shared by every caller, lists none of it, nor its size.
        scoped = bool(binding.scope) or (reading is not None and reading.snapshot.scoped)
        if disclose is Disclosure.LIST and reading is not None and not scoped and reading.snapshot.size <= limit:
            prop["enum"] = _members(reading)
            if reading not in readings:
                readings.append(reading)
        else:
            # Too many to list, not to be shown, or not loaded: say where the values come from rather than guess.
            owner = f"one of the values of {binding.value_set}"
            if scoped:
                owner = f"one of the caller's own values of {binding.value_set}"
            elif reading is not None and disclose is not Disclosure.NONE:
                owner += f" ({reading.snapshot.size} values)"
            prop["description"] = (f"{prop['description']} " if prop.get("description") else "") + f"Must be {owner}."
        leaf = binding.path.steps[-1]
        if binding.required and isinstance(leaf, str):
            listed: list[str] = required if holder is None else holder.setdefault("required", [])
            if leaf not in listed:
                listed.append(leaf)
    _add_checked_arguments(tool, properties, required)
    if required:
        schema["required"] = required
    return schema, readings


def _add_checked_arguments(tool: ToolPolicy, properties: dict[str, Any], required: list[str]) -> None:
    """The arguments the records and rules check, where the schema leaves them out: a model never told of
    `order_id` never sends it, and the record check (fail closed) then refuses every call."""
    for record in tool.records:
        if record.id_path.nested:  # items[*].order_id: a property of the schema's own nested shape, not a new one
            continue
        # The id is looked up as a string, and a call without it is refused (MISSING_REQUIRED).
        name = record.id_path.top  # a quoted path (["order.id"]) names the key order.id
        if name not in properties:
            look_up = f", as {record.lookup_tool} returns it" if record.lookup_tool else ""
            properties[name] = {"type": "string", "description": f"The {record.kind}'s id{look_up}."}
        if name not in required:
            required.append(name)
    for rule in tool.rules:
        # Typed by the rule's `types:` (or the schema, already listed); required only where the schema says so
        # (a rule may read an optional argument behind has()).
        for name, kinds in rule.argument_types.items():
            if name != top_of(name):
                continue  # an element's field (items[*].quantity): typed inside the schema's own nested shape
            if name not in properties:
                properties[name] = {"type": kinds[0] if len(kinds) == 1 else list(kinds)}


def _node_at(schema: dict[str, Any], path: ArgPath) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The subschema `path` names in `schema` (a copy, built out where it says nothing: an object's
    `properties`, an array's `items`), and the object schema holding its last step (None after `[*]`). A
    local `$ref` on the way is inlined where the path passes (a copy of its target): a definition two
    arguments share (shipping and billing, one Address) carries neither's enum."""
    node = schema
    holder: dict[str, Any] | None = None
    for step in path.steps:
        node = _inlined(schema, node)
        if step is EVERY:
            node.setdefault("type", "array")
            items = node.get("items")
            if not isinstance(items, dict):
                items = node["items"] = {}
            node, holder = items, None
            continue
        node.setdefault("type", "object")
        properties = node.setdefault("properties", {})
        holder = node
        child = properties.get(step)
        if not isinstance(child, dict):
            child = properties[step] = {}
        node = child
    return _inlined(schema, node), holder


def _inlined(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its local `$ref` replaced by a copy of the target's keywords (its own kept beside them, as
    2020-12 reads a `$ref` with siblings): what is written into it then changes this place alone."""
    for _ in range(8):  # a few hops at most: a reference to a reference
        reference = node.get("$ref")
        if not isinstance(reference, str) or not reference.startswith("#/"):
            return node
        target: Any = root
        for part in reference[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return node
        del node["$ref"]
        for key, value in copy.deepcopy(target).items():
            node.setdefault(key, value)
    return node


def _members(reading: SetReading) -> list[str]:
    snapshot = reading.snapshot
    return list(snapshot.sorted_members) if snapshot.sorted_members else sorted(snapshot.members)


def export_tools(
    policy: Policy, names: list[str], read: Callable[[str], SetReading | None], shape: str
) -> tuple[list[ExportedTool], str]:
    """The named tools (all, when none is named) and a digest of them all; KeyError names an unknown tool."""
    tools: Mapping[str, ToolPolicy] = policy.tools
    chosen = [tools[name] for name in names] if names else list(tools.values())
    exported = [export_tool(policy, tool, read, shape) for tool in chosen]
    return exported, digest([tool.version for tool in exported])
