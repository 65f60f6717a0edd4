"""Which check of a tool found a problem, by the names on-call overrides use (policy/check_ids.py)."""

from __future__ import annotations

from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.check_ids import ARG, SCHEMA_CHECK, check_of, tool_checks
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.verdict.findings import Problem


class CheckNames:
    """Which of one tool's checks found a problem: check_of, with a binding's problem at a path the binding
    passes through (`items[2]` is no object, under `arg:items[*].sku`) named by that binding."""

    def __init__(self, tool: ToolPolicy) -> None:
        self.checks = tool_checks(tool)
        self._bindings = [(binding.value_set, binding.name) for binding in tool.arguments]

    def of(self, problem: Problem) -> str:
        found = check_of(problem.code.value, problem.argument, problem.value_set)
        if not found.startswith(ARG) or found in self.checks:
            return found
        at = pattern_of(problem.argument)
        for value_set, pattern in self._bindings:
            if value_set == problem.value_set and (pattern.startswith(at) or at.startswith(pattern)):
                return ARG + pattern
        return SCHEMA_CHECK
