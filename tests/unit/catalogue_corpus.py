"""The corpus of real tool definitions test_catalogues.py judges: the project's own, MCP servers', frameworks'."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from argwatch.server.policy.loader import load_policy
from argwatch.server.policy.model import Policy
from argwatch.server.policy.tool_import import parse_definitions

ROOT = Path(__file__).resolve().parents[2]
CATALOGUES = ROOT / "tests" / "data" / "catalogues"


class CatalogueTool(NamedTuple):
    """One tool of the corpus: `name` is its tool in corpus_policy(), `origin` where its schema came from."""

    name: str
    origin: str
    schema: dict[str, Any]


def _own() -> list[tuple[str, dict[str, Any]]]:
    found = []
    policy = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    for name, tool in policy["tools"].items():
        if "schema" in tool:
            found.append((f"examples/policy.yaml {name}", tool["schema"]))
    for path in ("examples/first-policy/tools.json", "tests/data/mcp_tools.json"):
        for definition in parse_definitions(json.loads((ROOT / path).read_text()), path):
            assert isinstance(definition.schema, dict), path
            found.append((f"{path} {definition.name}", definition.schema))
    return found


def _mcp_servers() -> list[tuple[str, dict[str, Any]]]:
    document = json.loads((CATALOGUES / "mcp_reference_servers.json").read_text())
    return [
        (f"MCP {server} server {tool['name']}", tool["inputSchema"])
        for server, listed in document["servers"].items()
        for tool in listed["tools"]
    ]


def _frameworks() -> list[tuple[str, dict[str, Any]]]:
    document = json.loads((CATALOGUES / "frameworks.json").read_text())
    return [(f"{tool['from']} {tool['name']}", tool["schema"]) for tool in document["tools"]]


@functools.cache
def corpus() -> tuple[CatalogueTool, ...]:
    """Every tool, in a fixed order, each named so that it is a valid and unique tool name in a policy."""
    found = [*_own(), *_mcp_servers(), *_frameworks()]
    return tuple(
        CatalogueTool(f"t{index:03d}_{re.sub(r'[^A-Za-z0-9]+', '_', origin.rsplit(' ', 1)[-1])[-40:]}", origin, schema)
        for index, (origin, schema) in enumerate(found)
    )


def corpus_policy(folder: Path) -> Policy:
    """One policy importing every tool of the corpus as an MCP tools/list (written into `folder`), in reject
    mode, loaded as a gateway loads it."""
    listed = [{"name": tool.name, "description": tool.origin, "inputSchema": tool.schema} for tool in corpus()]
    (folder / "catalogue.json").write_text(json.dumps({"tools": listed}))
    (folder / "policy.yaml").write_text("default_mode: reject\ntool_definitions: [catalogue.json]\n")
    return load_policy(str(folder / "policy.yaml"))
