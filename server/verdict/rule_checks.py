"""The policy's CEL rules over args, record and session: a pure function of the call and the records found.

A rule runs only when every record it reads was found (a missing record is
already a problem or a skipped check). A rule that cannot be evaluated on the
call's values (a field absent, or of a JSON type the rule cannot compare) is
never a pass: it is a RULE_NOT_EVALUATED problem naming the rule and what it
read, or, where the policy says `on_error: open` for that rule, a skipped
check, listed and counted like any check that failed open. The model controls
the values, so it must not be able to switch a rule off by changing a type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import cel

from argwatch.server.policy.model import Failure, Rule, ToolPolicy
from argwatch.server.verdict.findings import Problem, ProblemCode, SkippedCheck
from argwatch.server.verdict.set_checks import as_json_text
from argwatch.server.verdict.tool_call import json_kind

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")


class RuleOutcome(NamedTuple):
    problems: list[Problem]
    errors: list[str]  # names of rules that could not be evaluated (counted in argwatch_rule_errors_total)
    skipped: list[SkippedCheck]  # those of them whose policy says on_error: open


def check_rules(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    found: Mapping[str, Mapping[str, Any]],
    session: Mapping[str, str],
) -> RuleOutcome:
    outcome = RuleOutcome([], [], [])
    if not tool.rules:
        return outcome
    runnable = []
    for rule in tool.rules:
        if not rule.records <= found.keys():
            continue
        if _mistyped(rule, arguments):  # compared, it could pass (args.id != 5 holds for "5"): not compared
            outcome.errors.append(rule.name)
            if rule.on_error is Failure.OPEN:
                outcome.skipped.append(SkippedCheck(rule.argument, f"rule.{rule.name}"))
            else:
                outcome.problems.append(_not_evaluated(rule, arguments))
            continue
        runnable.append(rule)
    # A rule whose record is missing does not run: that is already a problem (or a skipped check).
    roots = {"args": arguments, "record": found, "session": session}
    # Plain variables (cel_flatten.py): CEL converts scalars far faster than maps. A rule
    # reading a field the call lacks runs nested, so a missing key behaves exactly as it did.
    flat: list[Rule] = []
    nested: list[Rule] = []
    variables: dict[str, object] = {}
    for rule in runnable:
        if rule.flat_program is not None and _bind(rule, roots, variables):
            flat.append(rule)
        else:
            nested.append(rule)
    if flat:
        _run(flat, cel.Context(variables=variables), outcome, roots, arguments, flat=True)
    if nested:
        # One context for these rules, holding only the argument fields they read.
        wanted: frozenset[str] = frozenset().union(*(rule.arguments for rule in nested))
        context = cel.Context(
            variables={
                "args": {name: arguments[name] for name in wanted if name in arguments},
                "record": {name: dict(attrs) for name, attrs in found.items()},
                "session": dict(session),
            }
        )
        _run(nested, context, outcome, roots, arguments, flat=False)
    return outcome


def _bind(rule: Rule, roots: Mapping[str, Mapping[str, Any]], variables: dict[str, object]) -> bool:
    """Adds the rule's variables; False (adding none) when a field it reads is absent."""
    values = []
    for variable, path in rule.flat_paths:
        node: Any = roots[path[0]]
        for part in path[1:]:
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        values.append((variable, node))
    variables.update(values)
    return True


def _run(
    rules: list[Rule],
    context: Any,
    outcome: RuleOutcome,
    roots: Mapping[str, Mapping[str, Any]],
    arguments: Mapping[str, object],
    *,
    flat: bool,
) -> None:
    for rule in rules:
        try:
            holds = (rule.flat_program if flat else rule.program).execute(context)
        except Exception:  # a missing field or a type mismatch: the rule did not run
            outcome.errors.append(rule.name)
            if rule.on_error is Failure.OPEN:
                outcome.skipped.append(SkippedCheck(rule.argument, f"rule.{rule.name}"))
            else:
                outcome.problems.append(_not_evaluated(rule, arguments))
            continue
        if holds is not True:
            outcome.problems.append(_rule_problem(rule, roots, arguments))


def _mistyped(rule: Rule, arguments: Mapping[str, object]) -> bool:
    for name, kinds in rule.argument_types.items():
        if name in arguments and not any(_is_json_type(arguments[name], kind) for kind in kinds):
            return True
    return False


def _is_json_type(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, Mapping)
    return value is None  # null


def _not_evaluated(rule: Rule, arguments: Mapping[str, object]) -> Problem:
    read = "; ".join(_what_was_sent(name, arguments) for name in sorted(rule.arguments)) or "its fields"
    value = as_json_text(arguments.get(rule.argument)) if rule.argument in arguments else ""
    return Problem(
        ProblemCode.RULE_NOT_EVALUATED,
        f"{rule.argument or 'arguments'}: could not be checked by the rule {rule.name} ({read}), so the call "
        "cannot pass it; send every value it reads, each as the JSON type the tool takes",
        argument=rule.argument,
        value_set=f"rule.{rule.name}",
        value=value,
    )


def _what_was_sent(name: str, arguments: Mapping[str, object]) -> str:
    if name not in arguments:
        return f"{name} is missing"
    value = arguments[name]
    return f"{name} is {json_kind(value)} {as_json_text(value, 40)}"


def _rule_problem(rule: Rule, context: Mapping[str, Any], arguments: Mapping[str, object]) -> Problem:
    message = _PLACEHOLDER.sub(lambda match: _lookup(context, match.group(1)), rule.message)
    value = as_json_text(arguments.get(rule.argument)) if rule.argument in arguments else ""
    return Problem(
        ProblemCode(rule.code),
        f"{rule.argument or 'arguments'}: {message}",
        argument=rule.argument,
        value_set=f"rule.{rule.name}",
        value=value,
    )


def _lookup(context: Mapping[str, Any], path: str) -> str:
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return "{" + path + "}"
        node = node[part]
    return as_json_text(node, 80) if not isinstance(node, str) else node
