"""Tool definitions as they already exist (MCP tools/list, OpenAI and Anthropic function definitions), read as-is.

Each yields a name, a description and the arguments' JSON Schema; the policy's
own `tools:` entries layer argwatch's bindings, rules and mode on top.
Accepted shapes, per entry:
- MCP:       {"name", "description", "inputSchema"}   (a tools/list result, or its JSON-RPC envelope)
- OpenAI:    {"type": "function", "function": {"name", "description", "parameters"}}
             {"type": "function", "name", "description", "parameters"}   (Responses API)
- Anthropic: {"name", "description", "input_schema"}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from argwatch.common.files import DEFINITIONS_BYTES, read_file
from argwatch.server.policy.strict_yaml import load_json, load_yaml


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    schema: Mapping[str, Any] | bool


class DefinitionError(ValueError):
    """A definitions file that cannot be read; the message names the entry."""


def read_definitions(path: str) -> list[ToolDefinition]:
    """Every tool defined in a JSON or YAML file; raises DefinitionError naming what is wrong."""
    try:
        raw = read_file(path, DEFINITIONS_BYTES)
    except OSError as error:
        raise DefinitionError(f"cannot read {path}: {error.strerror}") from None
    try:
        document = load_json(raw) if path.endswith(".json") else load_yaml(raw)
    except (ValueError, yaml.YAMLError) as error:  # DuplicateKeys is a ValueError, as JSON's errors are
        raise DefinitionError(f"{path}: not valid JSON/YAML: {str(error).splitlines()[0]}") from None
    return parse_definitions(document, path)


def parse_definitions(document: object, origin: str) -> list[ToolDefinition]:
    entries = _entries(document)
    if entries is None:
        raise DefinitionError(
            f"{origin}: expected an MCP tools/list result or a list of OpenAI/Anthropic tool definitions"
        )
    definitions = [_definition(entry, f"{origin}[{index}]") for index, entry in enumerate(entries)]
    names = [definition.name for definition in definitions]
    counts = Counter(names)  # names.count() for each name was 3 s for 10,000 tools
    twice = sorted(name for name, count in counts.items() if count > 1)
    if twice:
        raise DefinitionError(
            f"{origin}: the tool {twice[0]!r} is defined twice (entries {_positions(names, twice[0])})"
        )
    return definitions


def _positions(names: list[str], name: str) -> str:
    return " and ".join(f"[{index}]" for index, found in enumerate(names) if found == name)


def _entries(document: object) -> list[Any] | None:
    if isinstance(document, dict):
        if isinstance(document.get("result"), dict):  # a JSON-RPC response to tools/list
            document = document["result"]
        tools = document.get("tools") if isinstance(document, dict) else None
        return tools if isinstance(tools, list) else None
    return document if isinstance(document, list) else None


def _definition(entry: object, where: str) -> ToolDefinition:
    if not isinstance(entry, dict):
        raise DefinitionError(f"{where}: expected a tool definition (a mapping)")
    if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
        entry = entry["function"]  # OpenAI Chat Completions
    assert isinstance(entry, dict)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise DefinitionError(f"{where}: a tool definition needs a name")
    for key in ("inputSchema", "input_schema", "parameters"):
        if key in entry:
            schema = entry[key]
            break
    else:
        schema = {"type": "object"}  # a tool without arguments
    if not isinstance(schema, dict | bool):  # true and false are JSON Schemas too (2020-12)
        raise DefinitionError(f"{where} ({name}): the arguments' schema must be a JSON object, true or false")
    description = entry.get("description", "")
    return ToolDefinition(name, description if isinstance(description, str) else "", schema)
