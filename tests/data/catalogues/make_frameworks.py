"""Writes tests/data/catalogues/frameworks.json: tool schemas as agent frameworks generate them from Python.

    .venv/bin/python tests/data/catalogues/make_frameworks.py   # deterministic for the locked versions

Two kinds, both from real objects of the packages requirements/test.lock installs:
- the OpenAI Agents SDK's `function_schema` on real annotated functions (pydantic's, hypothesis',
  click's, textual's, ...), strict as `@function_tool` makes them by default, or as it makes them
  with `strict_mode=False` where the signature cannot be strict;
- pydantic's `model_json_schema()` on the MCP SDK's and the OpenAI SDK's own models, which is what
  pydantic-ai and the MCP SDK send for a tool whose arguments are a model.

Stored rather than generated per test run: generating takes about 15 s, and a new release of one of
these packages then changes the corpus only when someone runs this again and reads the diff.
"""

from __future__ import annotations

import collections
import copy
import importlib
import inspect
import json
import os
import pkgutil
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis.errors import HypothesisWarning
from jsonschema import Draft202012Validator

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frameworks.json")
# Typed packages whose public functions look like the tools people write (names, flags, counts, paths).
FUNCTION_PACKAGES = (
    "pydantic",
    "langchain_core",
    "hypothesis",
    "mcp",
    "click",
    "packaging",
    "textual",
    "mkdocs",
    "markdown",
    "rich",
    "prometheus_client",
    "cryptography",
    "anyio",
)
MODEL_PACKAGES = ("mcp.types", "openai.types")
MAX_SCHEMA_CHARS = 4000  # a tool's arguments, not a whole API: larger ones are left out
PER_PACKAGE = 40  # so that no one package's style is most of the corpus


def module_names(root: str) -> Iterator[str]:
    package = importlib.import_module(root)
    yield root
    if not hasattr(package, "__path__"):
        return
    walk = pkgutil.walk_packages(package.__path__, root + ".", onerror=lambda name: None)
    while True:
        try:
            found = next(walk)
        except StopIteration:
            return
        except Exception:  # a subpackage that needs an extra not installed (openai's numpy helpers)
            continue
        if "._" not in found.name and "test" not in found.name:
            yield found.name


def public(root: str, keep: Callable[[str, object], bool]) -> Iterator[tuple[str, Any]]:
    for name in module_names(root):
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for attribute, value in sorted(vars(module).items()):
            if not attribute.startswith("_") and getattr(value, "__module__", "") == name and keep(attribute, value):
                yield f"{name}.{attribute}", value


def annotated_function(_name: str, value: object) -> bool:
    if not inspect.isfunction(value):
        return False
    try:
        parameters = inspect.signature(value).parameters.values()
    except (TypeError, ValueError):
        return False
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return bool(named) and all(p.annotation is not p.empty for p in named)


def function_tools() -> Iterator[dict[str, Any]]:
    from agents.function_schema import function_schema

    for root in FUNCTION_PACKAGES:
        kept = 0
        for name, function in public(root, annotated_function):
            for strict in (True, False):
                try:
                    schema = function_schema(function, strict_json_schema=strict).params_json_schema
                except Exception:  # a parameter type pydantic cannot describe, a forward reference
                    continue
                yield {"name": name, "from": f"openai-agents function_schema(strict={strict})", "schema": schema}
                kept += 1
                break
            if kept >= PER_PACKAGE:
                break


def model_tools() -> Iterator[dict[str, Any]]:
    from pydantic import BaseModel

    for root in MODEL_PACKAGES:
        kept = 0
        models = public(root, lambda _n, v: isinstance(v, type) and issubclass(v, BaseModel) and v is not BaseModel)
        for name, model in models:
            try:
                schema = model.model_json_schema()
            except Exception:
                continue
            yield {"name": name, "from": "pydantic model_json_schema()", "schema": schema}
            kept += 1
            if kept >= PER_PACKAGE * 2:
                break


def usable(schema: dict[str, Any]) -> bool:
    """A valid 2020-12 schema of an object, small enough to be a tool's, that hypothesis-jsonschema can draw from."""
    from hypothesis_jsonschema import from_schema

    text = json.dumps(schema)
    if len(text) > MAX_SCHEMA_CHARS or schema.get("type") != "object":
        return False
    try:
        Draft202012Validator.check_schema(schema)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HypothesisWarning)
            from_schema(copy.deepcopy(schema)).validate()  # it resolves $refs in place
    except Exception:  # a recursive $ref, an empty anyOf: no valid call can be drawn
        return False
    return True


def main() -> None:
    warnings.simplefilter("ignore")
    tools, seen = [], set()
    for tool in [*function_tools(), *model_tools()]:
        key = json.dumps(tool["schema"], sort_keys=True)
        if key not in seen and usable(tool["schema"]):
            seen.add(key)
            tools.append(tool)
    kinds = collections.Counter(tool["name"].split(".")[0] for tool in tools)
    about = "Tool schemas generated from real Python objects by make_frameworks.py (its docstring says how)."
    # One tool a line, so that a regeneration's diff reads tool by tool.
    lines = ",\n".join(json.dumps(tool, sort_keys=True, ensure_ascii=False) for tool in tools)
    with open(OUT, "w") as handle:
        handle.write(f'{{"about": {json.dumps(about)},\n"tools": [\n{lines}\n]}}\n')
    print(f"{len(tools)} tools written to {OUT}: {dict(sorted(kinds.items()))}")


if __name__ == "__main__":
    main()
