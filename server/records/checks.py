"""Checks against the system of record: does the id exist, and does it belong to the session's customer.

Look-ups for one call run concurrently. A record that cannot be read fails its
check open (a skipped check, counted) or closed (CHECK_UNAVAILABLE), as the
policy says per record. The records found go on to the policy's CEL rules
(verdict/rule_checks.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from argwatch.server.policy.model import Failure, RecordBinding, ToolPolicy
from argwatch.server.records.lookup_client import Lookup, RecordClient
from argwatch.server.verdict.findings import Problem, ProblemCode, SkippedCheck
from argwatch.server.verdict.set_checks import as_json_text


class RecordOutcome(NamedTuple):
    problems: list[Problem]
    skipped: list[SkippedCheck]
    found: dict[str, Mapping[str, Any]]  # binding name -> attributes, for records that exist


async def check_records(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    customer_id: str,
    clients: Mapping[str, RecordClient],
    deadline: float | None,
) -> RecordOutcome:
    outcome = RecordOutcome([], [], {})
    wanted: list[tuple[RecordBinding, str]] = []
    for binding in tool.records:
        value = arguments.get(binding.id_argument)
        # An id that cannot be looked up is a problem, never a check skipped in silence: the model
        # writes it, and must not switch off an ownership check by sending a number or nothing.
        unusable = _unusable_id(binding, value)
        if unusable is not None:
            outcome.problems.append(unusable)
        else:
            assert isinstance(value, str)
            wanted.append((binding, value))
    # Cache hits are answered in place; the rest go out together (one directly: gather's tasks
    # cost a measurable share of a call for nothing when there is only one: docs/performance.md).
    lookups: list[Lookup | None] = [clients[binding.source].cached(binding.kind, value) for binding, value in wanted]
    missing = [index for index, lookup in enumerate(lookups) if lookup is None]
    if len(missing) == 1:
        binding, value = wanted[missing[0]]
        lookups[missing[0]] = await clients[binding.source].lookup(binding.kind, value, deadline)
    elif missing:
        fetched = await asyncio.gather(
            *(clients[wanted[i][0].source].lookup(wanted[i][0].kind, wanted[i][1], deadline) for i in missing)
        )
        for index, answer in zip(missing, fetched, strict=True):
            lookups[index] = answer
    for (binding, record_id), answered in zip(wanted, lookups, strict=True):
        assert answered is not None
        _judge(binding, record_id, answered, customer_id, outcome)
    return outcome


MAX_ID_CHARS = 256  # ids are kept in the look-up cache: none longer than this is looked up


def _unusable_id(binding: RecordBinding, value: object) -> Problem | None:
    argument = binding.id_argument
    where = f"record.{binding.name}"
    if value is None or value == "":
        return Problem(
            ProblemCode.MISSING_REQUIRED,
            f"{argument}: required, missing (the {binding.kind} it names is checked)",
            argument=argument,
            value_set=where,
            expected=f"the id of a {binding.kind}, a string",
        )
    if not isinstance(value, str):
        return Problem(
            ProblemCode.WRONG_TYPE,
            f"{argument}: expected the id of a {binding.kind} as a string, got {as_json_text(value, 80)}",
            argument=argument,
            value_set=where,
            value=as_json_text(value),
            expected=f"the id of a {binding.kind}, a string",
        )
    if len(value) > MAX_ID_CHARS:
        return Problem(
            ProblemCode.OUT_OF_RANGE,
            f"{argument}: {len(value)} characters is no {binding.kind} id (at most {MAX_ID_CHARS})",
            argument=argument,
            value_set=where,
            value=as_json_text(value),
            expected=f"the id of a {binding.kind}, at most {MAX_ID_CHARS} characters",
        )
    return None


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
        outcome.problems.append(_not_found(binding, shown))
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


def _not_found(binding: RecordBinding, shown: str) -> Problem:
    look_up = f"; look it up first with {binding.lookup_tool}" if binding.lookup_tool else ""
    return Problem(
        ProblemCode.NOT_FOUND,
        f"{binding.id_argument}: no {binding.kind} {shown} exists{look_up}",
        argument=binding.id_argument,
        value_set=f"record.{binding.name}",
        value=shown,
    )


def concealed_owner(binding: RecordBinding, problem: Problem) -> Problem:
    """`problem` as the caller sees it unless the record says reveal_not_owned: a record of another customer
    reads exactly as one that does not exist (counted as NOT_OWNED all the same), so that a model, and whoever
    drives it, cannot probe which ids exist for other customers."""
    if problem.code is not ProblemCode.NOT_OWNED:
        return problem
    return replace(_not_found(binding, problem.value), argument=problem.argument)
