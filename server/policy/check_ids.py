"""The checks of a tool, by the names an on-call override gives them, and which check found a problem.

A tool's checks are its value-set bindings (`arg:items[*].sku`, by the
binding's path), its records (`record:order`: existence, ownership, and the
look-up failing closed), its rules (`rule:not_above_paid`), its schema
(`schema`) and, for a tool with side effects, the repeat check (`repeat`).
An override of one check (modes/document.py) changes whether that check's
problems refuse a call, and nothing else: the tool's other checks are
enforced as before. A failure override names no tool but a source, a value
set or a record kind, and changes whether the checks reading it fail open or
closed while it cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping

from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.model import Failure, Policy, RecordBinding, ToolPolicy, ValueSetConfig

SCHEMA_CHECK = "schema"
REPEAT_CHECK = "repeat"
ARG = "arg:"
RECORD = "record:"
RULE = "rule:"


def tool_checks(tool: ToolPolicy) -> frozenset[str]:
    """Every check of `tool` an override can name."""
    if tool.check_names:
        return tool.check_names
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


# What a failure override names (with no tool: it holds for every tool whose checks read it): a source, a
# value set, or a record kind. Its mode is read as a failure: observe fails open, reject fails closed.
SOURCE = "source:"
VALUE_SET = "set:"
RECORD_KIND = "record_kind:"
FAILURE_PREFIXES = (SOURCE, VALUE_SET, RECORD_KIND)


def failure_targets(policy: Policy) -> frozenset[str]:
    """Every source, value set and record kind a failure override can name."""
    targets = {SOURCE + name for name in policy.sources}
    targets |= {VALUE_SET + name for name in policy.value_sets}
    targets |= {RECORD_KIND + record.kind for tool in policy.tools.values() for record in tool.records}
    return frozenset(targets)


def set_failure(config: ValueSetConfig, overrides: Mapping[str, Failure]) -> Failure:
    """A value set's failure in force: an override of the set, else of its source, else the policy's."""
    return overrides.get(VALUE_SET + config.name) or overrides.get(SOURCE + config.source) or config.failure


def record_failure(binding: RecordBinding, overrides: Mapping[str, Failure]) -> Failure:
    """A record check's failure in force: an override of its kind, else of its source, else the policy's."""
    return overrides.get(RECORD_KIND + binding.kind) or overrides.get(SOURCE + binding.source) or binding.failure
