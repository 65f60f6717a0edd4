"""Checks against the system of record: existence, ownership, and the policy's CEL rules over args, record, session.

Look-ups for one call run concurrently. A record that cannot be read fails its
check open (a skipped check, counted) or closed (CHECK_UNAVAILABLE), as the
policy says per record. A rule runs only when every record it reads was found;
a rule that cannot be evaluated (a missing field, a type mismatch) is reported
as an error, never as a pass.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import cel

from argwatch.server.checker import as_json_text
from argwatch.server.findings import Problem, ProblemCode, SkippedCheck
from argwatch.server.policy_model import Failure, RecordBinding, Rule, ToolPolicy
from argwatch.server.records import Lookup, RecordClient

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")


class RecordOutcome(NamedTuple):
    problems: list[Problem]
    skipped: list[SkippedCheck]
    found: dict[str, Mapping[str, Any]]  # binding name -> attributes, for records that exist


class RuleOutcome(NamedTuple):
    problems: list[Problem]
    errors: list[str]  # names of rules that could not be evaluated


async def check_records(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    customer_id: str,
    clients: Mapping[str, RecordClient],
    deadline: float | None,
) -> RecordOutcome:
    wanted = [
        (binding, value)
        for binding in tool.records
        if isinstance(value := arguments.get(binding.id_argument), str) and value
    ]
    lookups = await asyncio.gather(
        *(clients[binding.source].lookup(binding.kind, value, deadline) for binding, value in wanted)
    )
    outcome = RecordOutcome([], [], {})
    for (binding, record_id), lookup in zip(wanted, lookups, strict=True):
        _judge(binding, record_id, lookup, customer_id, outcome)
    return outcome


def _judge(binding: RecordBinding, record_id: str, lookup: Lookup, customer_id: str, outcome: RecordOutcome) -> None:
    shown = as_json_text(record_id)
    argument = binding.id_argument
    if not lookup.available:
        if binding.failure is Failure.CLOSED:
            outcome.problems.append(
                Problem(
                    ProblemCode.CHECK_UNAVAILABLE,
                    f"{argument}: the {binding.kind} {shown} could not be checked ({lookup.error}) and this check "
                    "fails closed",
                    argument=argument,
                    value_set=f"record.{binding.name}",
                    value=shown,
                )
            )
        else:
            outcome.skipped.append(SkippedCheck(argument, f"record.{binding.name}"))
        return
    if not lookup.found:
        look_up = f"; look it up first with {binding.lookup_tool}" if binding.lookup_tool else ""
        outcome.problems.append(
            Problem(
                ProblemCode.NOT_FOUND,
                f"{argument}: no {binding.kind} {shown} exists{look_up}",
                argument=argument,
                value_set=f"record.{binding.name}",
                value=shown,
            )
        )
        return
    owner = binding.owner_attribute
    if owner and str(lookup.attributes.get(owner, "")) != customer_id:
        outcome.problems.append(
            Problem(
                ProblemCode.NOT_OWNED,
                f"{argument}: the {binding.kind} {shown} belongs to another customer",
                argument=argument,
                value_set=f"record.{binding.name}",
                value=shown,
            )
        )
        return
    outcome.found[binding.name] = lookup.attributes


def check_rules(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    found: Mapping[str, Mapping[str, Any]],
    session: Mapping[str, str],
) -> RuleOutcome:
    outcome = RuleOutcome([], [])
    if not tool.rules:
        return outcome
    # One context for all of the call's rules, holding only the argument fields they read:
    # CEL converts its variables on every execute, at a cost that grows with their size.
    wanted: frozenset[str] = frozenset().union(*(rule.arguments for rule in tool.rules))
    variables = {
        "args": {name: arguments[name] for name in wanted if name in arguments},
        "record": {name: dict(attrs) for name, attrs in found.items()},
        "session": dict(session),
    }
    context = cel.Context(variables=variables)
    for rule in tool.rules:
        if not rule.records <= found.keys():
            continue  # a record it reads is missing: that is already a problem (or a skipped check)
        try:
            holds = rule.program.execute(context)
        except Exception:  # a missing field or a type mismatch: the rule did not run
            outcome.errors.append(rule.name)
            continue
        if holds is not True:
            outcome.problems.append(_rule_problem(rule, variables, arguments))
    return outcome


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
