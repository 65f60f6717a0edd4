"""Checks against the system of record: does the id exist, and does it belong to the session's customer.

Look-ups for one call run concurrently. A record that cannot be read fails its
check open (a skipped check, counted) or closed (CHECK_UNAVAILABLE), as the
policy says per record. The records found go on to the policy's CEL rules
(verdict/rule_checks.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from argwatch.server.policy.arg_paths import format_path
from argwatch.server.policy.check_ids import record_failure
from argwatch.server.policy.model import DEFAULT_MAX_ELEMENTS, Failure, RecordBinding, ToolPolicy
from argwatch.server.records.lookup_client import Lookup, RecordLookups
from argwatch.server.verdict.arg_values import locate
from argwatch.server.verdict.findings import Problem, ProblemCode, SkippedCheck, SkipReason
from argwatch.server.verdict.set_checks import as_json_text


class RecordOutcome(NamedTuple):
    problems: list[Problem]
    skipped: list[SkippedCheck]
    # binding name -> attributes, for records that exist and are the customer's; for a binding of many
    # ids (`items[*].order_id`), the list of them in the call's order, present only when every one is.
    found: dict[str, Any]


class _Wanted(NamedTuple):
    binding: RecordBinding
    where: str  # the id's concrete path (`items[2].order_id`)
    record_id: str


async def check_records(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    customer_id: str,
    clients: Mapping[str, RecordLookups],
    deadline: float | None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    failures: Mapping[str, Failure] = MappingProxyType({}),
) -> RecordOutcome:
    """Existence and ownership of every record the call names; `failures` are on-call's failure overrides
    (check_ids.record_failure: of a record kind or a source), over each binding's own."""
    outcome = RecordOutcome([], [], {})
    wanted: list[_Wanted] = []
    incomplete: set[str] = set()  # many-id bindings with an id not judged found
    for binding in tool.records:
        if not binding.id_path.nested:
            _take(binding, binding.id_argument, arguments.get(binding.id_path.top), wanted, outcome)
            continue
        located = locate(arguments, binding.id_path, max_elements)
        problems_before = len(outcome.problems)
        if binding.required:
            outcome.problems.extend(_absent_id(binding, format_path(where)) for where in located.missing)
        for where, value, needed in located.misshapen:
            outcome.problems.append(_misshapen_id(binding, format_path(where), value, needed))
        for where, value in located.found:
            _take(binding, format_path(where), value, wanted, outcome)
        if located.unchecked:
            incomplete.add(binding.name)
            outcome.skipped.append(
                SkippedCheck(
                    binding.id_argument, f"record.{binding.name}", SkipReason.ELEMENTS_LIMIT, located.unchecked
                )
            )
        if len(outcome.problems) > problems_before:
            incomplete.add(binding.name)
    answers = await _look_up(wanted, clients, deadline)
    for one in wanted:
        answer = answers[one.binding.source, one.binding.kind, one.record_id]
        attributes = _judge(one, answer, customer_id, outcome, record_failure(one.binding, failures))
        if not one.binding.id_path.in_arrays:
            if attributes is not None:
                outcome.found[one.binding.name] = attributes
        elif attributes is None:
            incomplete.add(one.binding.name)
        elif one.binding.name not in incomplete:
            outcome.found.setdefault(one.binding.name, []).append(attributes)
    for binding in tool.records:
        if binding.name in incomplete:
            outcome.found.pop(binding.name, None)
        elif binding.id_path.in_arrays:
            outcome.found.setdefault(binding.name, [])  # no element: the rules see an empty list
    return outcome


def _take(binding: RecordBinding, where: str, value: object, wanted: list[_Wanted], outcome: RecordOutcome) -> None:
    """An id to look up, or (one that cannot be) a problem."""
    # An id that cannot be looked up is a problem, never a check skipped in silence: the model
    # writes it, and must not switch off an ownership check by sending a number or nothing.
    unusable = _unusable_id(binding, where, value)
    if unusable is not None:
        outcome.problems.append(unusable)
    else:
        assert isinstance(value, str)
        wanted.append(_Wanted(binding, where, value))


async def _look_up(
    wanted: list[_Wanted], clients: Mapping[str, RecordLookups], deadline: float | None
) -> dict[tuple[str, str, str], Lookup]:
    """An answer for every (source, kind, id) wanted: cache hits in place, the rest of each source and
    kind together in one batch (one look-up directly: gather's tasks cost a measurable share of a call for
    nothing when there is only one: docs/performance.md)."""
    answers: dict[tuple[str, str, str], Lookup] = {}
    pending: dict[tuple[str, str], list[str]] = {}
    asked: set[tuple[str, str, str]] = set()  # a set: ids in the thousands, each asked once
    for one in wanted:
        key = (one.binding.source, one.binding.kind, one.record_id)
        if key in answers or key in asked:
            continue
        hit = clients[key[0]].cached(key[1], key[2])
        if hit is not None:
            answers[key] = hit
        else:
            asked.add(key)
            pending.setdefault(key[:2], []).append(one.record_id)
    if len(pending) == 1:
        (source, kind), ids = next(iter(pending.items()))
        fetched = [await clients[source].lookup_many(kind, ids, deadline)]
    elif pending:
        fetched = list(
            await asyncio.gather(
                *(clients[source].lookup_many(kind, ids, deadline) for (source, kind), ids in pending.items())
            )
        )
    else:
        return answers
    for ((source, kind), ids), lookups in zip(pending.items(), fetched, strict=True):
        for record_id, lookup in zip(ids, lookups, strict=True):
            answers[source, kind, record_id] = lookup
    return answers


MAX_ID_CHARS = 256  # ids are kept in the look-up cache: none longer than this is looked up


def _unusable_id(binding: RecordBinding, argument: str, value: object) -> Problem | None:
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


def owned_by(held: object, customer_id: str) -> bool:
    """Whether a record's owner attribute names `customer_id`: a string or whole number equal to it; a
    record with no owner, or null, is no one's (str(None) would equal a customer named "None")."""
    if isinstance(held, bool) or not isinstance(held, str | int) or held == "":
        return False
    return str(held) == customer_id


def _no_customer(binding: RecordBinding) -> Problem:
    return Problem(
        ProblemCode.MISSING_SCOPE,
        f"{binding.id_argument}: the {binding.kind} must belong to the session's customer, and the call's "
        "session names none (session.customer_id is empty): ownership cannot be checked",
        argument=binding.id_argument,
        value_set=f"record.{binding.name}",
    )


def _absent_id(binding: RecordBinding, where: str) -> Problem:
    return Problem(
        ProblemCode.MISSING_REQUIRED,
        f"{where}: required, missing (the {binding.kind} it names is checked)",
        argument=where,
        value_set=f"record.{binding.name}",
        expected=f"the id of a {binding.kind}, a string",
    )


def _misshapen_id(binding: RecordBinding, where: str, value: object, needed: str) -> Problem:
    return Problem(
        ProblemCode.WRONG_TYPE,
        f"{where}: expected {needed} holding {binding.id_argument}, got {as_json_text(value, 80)}",
        argument=where,
        value_set=f"record.{binding.name}",
        value=as_json_text(value),
        expected=needed,
    )


def _judge(
    one: _Wanted, lookup: Lookup, customer_id: str, outcome: RecordOutcome, failure: Failure
) -> Mapping[str, Any] | None:
    """The record's attributes if it exists and is the customer's; None, with the problem or skipped check."""
    binding, record_id, argument = one.binding, one.record_id, one.where
    shown = as_json_text(record_id)
    if not lookup.available:
        if failure is Failure.CLOSED:
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
        elif (skipped := SkippedCheck(binding.id_argument, f"record.{binding.name}")) not in outcome.skipped:
            outcome.skipped.append(skipped)  # one per binding: one source down is one check not run
        return None
    if not lookup.found:
        outcome.problems.append(_not_found(binding, shown, argument))
        return None
    owner = binding.owner_attribute
    if owner and not customer_id:
        # No customer to compare with: the integration's omission, never a pass ("" would equal a record
        # that names no owner), and not the model's to repair.
        if (missing := _no_customer(binding)) not in outcome.problems:
            outcome.problems.append(missing)
        return None
    if owner and not owned_by(lookup.attributes.get(owner), customer_id):
        outcome.problems.append(
            Problem(
                ProblemCode.NOT_OWNED,
                f"{argument}: the {binding.kind} {shown} belongs to another customer",
                argument=argument,
                value_set=f"record.{binding.name}",
                value=shown,
            )
        )
        return None
    return lookup.attributes


def _not_found(binding: RecordBinding, shown: str, argument: str) -> Problem:
    look_up = f"; look it up first with {binding.lookup_tool}" if binding.lookup_tool else ""
    return Problem(
        ProblemCode.NOT_FOUND,
        f"{argument}: no {binding.kind} {shown} exists{look_up}",
        argument=argument,
        value_set=f"record.{binding.name}",
        value=shown,
    )


def concealed_owner(binding: RecordBinding, problem: Problem) -> Problem:
    """`problem` as the caller sees it unless the record says reveal_not_owned: a record of another customer
    reads exactly as one that does not exist (counted as NOT_OWNED all the same), so that a model, and whoever
    drives it, cannot probe which ids exist for other customers."""
    if problem.code is not ProblemCode.NOT_OWNED:
        return problem
    return _not_found(binding, problem.value, problem.argument)
