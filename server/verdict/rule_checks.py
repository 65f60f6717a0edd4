"""The policy's CEL rules over args, record and session: a pure function of the call and the records found.

A rule runs only when every record it reads was found (a missing record is
already a problem or a skipped check). A rule that cannot be evaluated (a
missing field, a type mismatch) is reported as an error, never as a pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import cel

from argwatch.server.policy.model import Rule, ToolPolicy
from argwatch.server.verdict.findings import Problem, ProblemCode
from argwatch.server.verdict.set_checks import as_json_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")


class RuleOutcome(NamedTuple):
    problems: list[Problem]
    errors: list[str]  # names of rules that could not be evaluated


def check_rules(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    found: Mapping[str, Mapping[str, Any]],
    session: Mapping[str, str],
) -> RuleOutcome:
    outcome = RuleOutcome([], [])
    if not tool.rules:
        return outcome
    runnable = [rule for rule in tool.rules if rule.records <= found.keys()]
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
            continue
        if holds is not True:
            outcome.problems.append(_rule_problem(rule, roots, arguments))


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
