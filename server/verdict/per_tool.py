"""A value per tool of a policy, worked out when a call first needs it rather than for every tool at once.

A reload of a 10,000-tool policy built each tool's plans on the event loop,
stalling every call for the length of it; most tools of a large catalogue are
called rarely, and a tool's first call now pays for its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from argwatch.server.policy.model import ToolPolicy

T = TypeVar("T")


class PerTool(dict[str, T]):
    """`make(tool)` for each tool of `tools` that is asked for, kept; a KeyError for a name the policy lacks
    (a caller's tool name never adds an entry)."""

    def __init__(self, tools: Mapping[str, ToolPolicy], make: Callable[[ToolPolicy], T]) -> None:
        super().__init__()
        self._tools = tools
        self._make = make

    def __missing__(self, name: str) -> T:
        made = self[name] = self._make(self._tools[name])
        return made

    def get(self, name: str, default: T | None = None) -> T | None:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default
