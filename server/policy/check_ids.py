"""The checks of a tool, by the names an on-call override gives them, and which check found a problem.

A tool's checks are its value-set bindings (`arg:items[*].sku`, by the
binding's path), its records (`record:order`: existence, ownership, and the
look-up failing closed), its rules (`rule:not_above_paid`), its schema
(`schema`) and, for a tool with side effects, the repeat check (`repeat`).
An override of one check (modes/document.py) changes whether that check's
problems refuse a call, and nothing else: the tool's other checks are
enforced as before.
"""

from __future__ import annotations

from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.model import ToolPolicy

SCHEMA_CHECK = "schema"
REPEAT_CHECK = "repeat"
ARG = "arg:"
RECORD = "record:"
RULE = "rule:"


def tool_checks(tool: ToolPolicy) -> frozenset[str]:
    """Every check of `tool` an override can name."""
    checks = {f"{ARG}{binding.name}" for binding in tool.arguments}
    checks |= {f"{RECORD}{record.name}" for record in tool.records}
    checks |= {f"{RULE}{rule.name}" for rule in tool.rules}
    if tool.schema is not None:
        checks.add(SCHEMA_CHECK)
    if tool.side_effect is not None:
        checks.add(REPEAT_CHECK)
    return frozenset(checks)


def check_of(code: str, argument: str, value_set: str) -> str:
    """The check that found a problem (its code's value, its argument path, its value set or record or rule);
    "" for a problem of the whole call (an unknown tool, arguments that are no JSON object)."""
    if value_set.startswith("record."):
        return RECORD + value_set[len("record.") :]
    if value_set.startswith("rule."):
        return RULE + value_set[len("rule.") :]
    if code == "repeated_call":
        return REPEAT_CHECK
    if value_set:
        return ARG + pattern_of(argument)
    if code in ("unknown_tool", "malformed_arguments") and not argument:
        return ""
    return SCHEMA_CHECK
