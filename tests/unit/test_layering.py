"""Layering: the server never imports Textual, the TUI never imports the server, the checker needs no wire types."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest


def loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(out.split())


@pytest.mark.slow
def test_the_server_does_not_import_textual_or_the_tui() -> None:
    modules = loaded_after("import argwatch.server.process.app, argwatch.server.cli")
    assert not any(m == "textual" or m.startswith(("textual.", "argwatch.tui")) for m in modules)


@pytest.mark.slow
def test_the_tui_does_not_import_the_server() -> None:
    modules = loaded_after(
        "import argwatch.tui.app, argwatch.tui.run, argwatch.tui.status_line, argwatch.tui.admin_client"
    )
    assert not any(m.startswith("argwatch.server") for m in modules)


@pytest.mark.slow
def test_the_verdict_core_works_without_wire_network_or_storage() -> None:
    """Every module of argwatch.server.verdict (and the policy loader and repair message) loads without gRPC,
    generated code, Redis, the cache library or metrics: the core is a pure function of plain values."""
    modules = loaded_after(
        "import importlib, pkgutil, argwatch.server.verdict as core\n"
        "for found in pkgutil.iter_modules(core.__path__):\n"
        "    importlib.import_module('argwatch.server.verdict.' + found.name)\n"
        "import argwatch.server.policy.loader, argwatch.server.repair.message"
    )
    assert "argwatch.server.verdict.set_checks" in modules  # the walk above found the modules
    forbidden = ("grpc", "argwatch.v1.", "redis", "aiocache", "prometheus_client", "argwatch.server.edge")
    assert not [m for m in modules if m.startswith(forbidden)]


@pytest.mark.slow
def test_what_every_side_shares_imports_none_of_the_sides() -> None:
    """argwatch.common is imported by the gateway, the TUI and the client alike, so it loads none of them."""
    modules = loaded_after("import argwatch.common.durations, argwatch.common.backoff, argwatch.common.channels")
    forbidden = ("argwatch.server", "argwatch.tui", "argwatch.client", "argwatch.v1.", "textual")
    assert not [m for m in modules if m.startswith(forbidden)]


FRAMEWORKS = ("agents", "langchain_core", "langgraph", "pydantic_ai", "mcp", "openai", "anthropic")


def _frameworks_in(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules if m.split(".")[0] in FRAMEWORKS}


@pytest.mark.slow
def test_the_client_loads_no_framework_and_each_gate_only_its_own() -> None:
    """The base install takes no agent framework, so `argwatch.client` may import none; each gate (an extra)
    imports its framework and no other's."""
    assert _frameworks_in(loaded_after("import argwatch.client, argwatch.client.gates")) == set()
    gates = {
        "openai_agents": {"agents", "openai", "mcp"},  # openai-agents itself loads openai and mcp
        "langgraph": {"langchain_core", "langgraph"},
        "pydantic_ai": {"pydantic_ai"},
        "mcp": {"mcp"},
    }
    for gate, allowed in gates.items():
        loaded = _frameworks_in(loaded_after(f"import argwatch.client.gates.{gate}"))
        assert gate.split("_")[0] in {name.split("_")[0] for name in loaded}, gate
        assert loaded <= allowed, f"argwatch.client.gates.{gate} loads {sorted(loaded - allowed)}"


# The server's packages, lowest first: each may import only those before it (and argwatch.common, the
# generated argwatch.v1). docs/developing.md draws the same order.
SERVER_LAYERS = (
    "policy",  # the policy: its model, loading and compiling it
    "sets",  # a value set's copy as the checker reads it: index, layers, retired history (pure)
    "verdict",  # the checks: a pure function of policy, call, set readings and records
    "telemetry",  # counts, metrics, the sampled log, events
    "state",  # caches and stores: memory and Redis, operations, atomic files
    "valuesets",  # following the owners' sources and holding the sets
    "records",  # look-ups in the systems of record
    "modes",  # the mode document and its stores (file, Redis)
    "repair",  # what the model is told: repair messages, tool definitions, repair tracking
    "decisions",  # the decision log: each verdict as a line, its writer thread, rotation and budget
    "validator",  # one call judged: every check, counted
    "shadow",  # a shadow policy: live calls judged again by it, never decided by it, the differences counted
    "edge",  # the gRPC services and what they put on the wire
    "tracing",  # OpenTelemetry (an extra): spans of the Gateway's calls, the decision log as OTLP logs
    "process",  # the gateway process: settings, listeners, reloads, start and stop
    "replay",  # the gateway's checks over recorded calls, offline
    "policytest",  # policy test cases, judged offline by the gateway's Validator
    "cli",  # the argwatch command
)
SERVER = Path(__file__).resolve().parents[2] / "server"


def _server_imports(path: Path) -> set[str]:
    """The server packages a module imports (at any depth: a deferred import counts too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.startswith("argwatch.server."):
                found.add(name.split(".")[2])
    return found


def test_server_packages_import_each_other_in_one_direction() -> None:
    rank = {package: position for position, package in enumerate(SERVER_LAYERS)}
    modules = sorted(SERVER.rglob("*.py"))
    packages = {path.relative_to(SERVER).parts[0].removesuffix(".py") for path in modules} - {"__init__"}
    assert packages == set(SERVER_LAYERS), "a new package: give it its place in SERVER_LAYERS"
    upward = []
    for path in modules:
        own = path.relative_to(SERVER).parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        upward += [
            f"{path.relative_to(SERVER)} imports {other}" for other in _server_imports(path) if rank[other] > rank[own]
        ]
    assert upward == []
