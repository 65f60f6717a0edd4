"""The mode store: each tool's mode and the global override, held in memory.

The mode in force for a tool is the global override when one is set, else the
tool's own mode. The store starts from the policy; the next issues add the
audited SetMode path, persistence to a file and sharing through Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from argwatch.server.policy_model import Mode, Policy

ModeListener = Callable[[str, Mode], None]


class ModeStore:
    """Per-tool modes plus an optional global override."""

    def __init__(self, policy: Policy, global_override: Mode | None = None) -> None:
        self._tool_modes: Mapping[str, Mode] = MappingProxyType(
            {name: tool.mode for name, tool in policy.tools.items()}
        )
        self._default = policy.default_mode
        self._global = global_override
        self._listeners: list[ModeListener] = []

    @property
    def global_override(self) -> Mode | None:
        return self._global

    def mode_for(self, tool: str) -> Mode:
        """The mode in force for `tool` (a tool the policy does not know gets the default mode)."""
        if self._global is not None:
            return self._global
        return self._tool_modes.get(tool, self._default)

    def tool_modes(self) -> Mapping[str, Mode]:
        """The mode in force for every tool the policy knows."""
        return {name: self.mode_for(name) for name in self._tool_modes}

    def set_tool(self, tool: str, mode: Mode) -> None:
        if tool not in self._tool_modes:
            raise KeyError(f"the policy has no tool {tool!r}")
        # A new mapping, never mutated in place: readers may hold the old one.
        self._tool_modes = MappingProxyType({**self._tool_modes, tool: mode})
        self._notify()

    def set_global(self, mode: Mode | None) -> None:
        self._global = mode
        self._notify()

    def subscribe(self, listener: ModeListener) -> None:
        """Calls `listener(tool, mode)` for every tool now and after every change."""
        self._listeners.append(listener)
        for tool, mode in self.tool_modes().items():
            listener(tool, mode)

    def _notify(self) -> None:
        modes = self.tool_modes()
        for listener in self._listeners:
            for tool, mode in modes.items():
                listener(tool, mode)
