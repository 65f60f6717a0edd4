"""Which check of a tool found a problem, by the names on-call overrides use (policy/check_ids.py)."""

from __future__ import annotations

from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.check_ids import ARG, SCHEMA_CHECK, check_of, tool_checks
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.verdict.findings import Problem, SkippedCheck

MAX_KNOWN = 1024


class CheckNames:
    """Which of one tool's checks found a problem: check_of, with a binding's problem at a path the binding
    passes through (`items[2]` is no object, under `arg:items[*].sku`) named by that binding."""

    def __init__(self, tool: ToolPolicy) -> None:
        self.checks = tool_checks(tool)
        self._bindings = [(binding.value_set, binding.name) for binding in tool.arguments]
        # Names already worked out: most calls repeat the same few. Bounded (a concrete path such as
        # `items[7].sku` is the caller's), and emptied when full rather than tracked for age.
        self._known: dict[tuple[str, str, str], str] = {}

    def of(self, problem: Problem) -> str:
        return self._named(problem.code.value, problem.argument, problem.value_set)

    def of_skipped(self, skipped: SkippedCheck) -> str:
        """The check that did not run: a binding's (by its set and path), a record's or a rule's."""
        return self._named("check_unavailable", skipped.argument, skipped.value_set)

    def _named(self, code: str, argument: str, value_set: str) -> str:
        key = (code, argument, value_set)
        found = self._known.get(key)
        if found is None:
            if len(self._known) >= MAX_KNOWN:
                self._known.clear()
            found = self._known[key] = self._worked_out(code, argument, value_set)
        return found

    def _worked_out(self, code: str, argument: str, value_set: str) -> str:
        found = check_of(code, argument, value_set)
        if not found.startswith(ARG) or found in self.checks:
            return found
        at = pattern_of(argument)
        for bound_set, pattern in self._bindings:
            if bound_set == value_set and (pattern.startswith(at) or at.startswith(pattern)):
                return ARG + pattern
        return SCHEMA_CHECK
