"""Hypothesis strategies over a tool's schema: valid calls (hypothesis-jsonschema), and each mutated by one fault."""

from __future__ import annotations

import copy
import functools
import json
import types
from collections.abc import Iterator
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as conjecture_utils
from hypothesis_jsonschema import _from_schema, from_schema

JsonPath = tuple[str | int, ...]


class _ManyWithMore(conjecture_utils.many):
    """hypothesis-jsonschema 0.23.1 (its latest) draws an object's keys with `while many.more():`;
    Hypothesis 6.170 took that method away for a with-block. This puts it back over the same steps."""

    def more(self) -> bool:
        if self._depth is None:
            self.__enter__()
        self._finish_element()
        if not self._decide():
            return False
        self.count += 1
        self._in_element, self._rejected = True, False
        return True


if not hasattr(conjecture_utils.many, "more"):  # only hypothesis-jsonschema's view of Hypothesis changes
    _compat = types.ModuleType(conjecture_utils.__name__)
    _compat.__dict__.update(vars(conjecture_utils))
    _compat.many = _ManyWithMore  # type: ignore[attr-defined]
    _from_schema.cu = _compat  # type: ignore[attr-defined]


@functools.cache
def _valid_calls(schema_text: str) -> st.SearchStrategy[dict[str, Any]]:
    # Every schema of the corpus is an object's (make_frameworks.py keeps no other), so every call is a dict.
    return cast("st.SearchStrategy[dict[str, Any]]", from_schema(json.loads(schema_text)))


def valid_calls(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Calls the schema accepts, as hypothesis-jsonschema draws them (built once per schema)."""
    return _valid_calls(json.dumps(schema, sort_keys=True))


def nodes(value: object, path: JsonPath = ()) -> Iterator[tuple[JsonPath, object]]:
    """Every value in a call with its path, the call itself first."""
    yield path, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from nodes(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from nodes(inner, (*path, index))


def _replaced(call: dict[str, Any], path: JsonPath, new: object) -> dict[str, Any]:
    changed = copy.deepcopy(call)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return changed


# A value of each JSON type, and names a model might invent (quotes and dots included: paths must quote them).
OTHER_TYPES: tuple[object, ...] = (None, True, 0, 2.5, "x", [], {})
INVENTED_KEYS = ("extra", "it's", "a.b", 'say "hi"', "Größe", "", "items[0]")


def _kind(value: object) -> str:
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


def _near(value: object) -> list[object]:
    """Values beside a scalar: out of an enum, a pattern, a length or a range by a little or a lot."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        return [value + 1, value - 1, -value - 1, value * 1_000_000_000 + 7, value + 0.5, 2**64]
    if isinstance(value, str):
        return [value + "!", value.upper() + "x", "", value * 40 + "z" * 300, " " + value]
    return []


@st.composite
def mutated_calls(draw: st.DrawFn, call: dict[str, Any]) -> dict[str, Any]:
    """`call` with one fault a model makes: a key dropped, a value of another type, an invented key, a value
    beside the legal one. Whether it is still valid is the reference validator's to say."""
    found = list(nodes(call))
    objects = [(path, value) for path, value in found if isinstance(value, dict)]
    inner = [(path, value) for path, value in found if path]
    kinds = ["add"] + (["drop"] if any(value for _, value in objects) else []) + (["retype", "near"] if inner else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "add":
        path, value = draw(st.sampled_from(objects))
        key = draw(st.sampled_from([name for name in INVENTED_KEYS if name not in value] or ["extra2"]))
        new = draw(st.sampled_from(OTHER_TYPES))
        return _replaced(call, (*path, key), new)
    if kind == "drop":
        path, value = draw(st.sampled_from([(p, v) for p, v in objects if v]))
        key = draw(st.sampled_from(sorted(value)))
        dropped = copy.deepcopy(call)
        parent: Any = dropped
        for step in path:
            parent = parent[step]
        del parent[key]
        return dropped
    where, old = draw(st.sampled_from(inner))
    if kind == "retype":
        return _replaced(call, where, draw(st.sampled_from([o for o in OTHER_TYPES if _kind(o) != _kind(old)])))
    choices = _near(old)
    return _replaced(call, where, draw(st.sampled_from(choices))) if choices else call
