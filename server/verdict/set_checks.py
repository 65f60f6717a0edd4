"""Value-set checks: a pure function of (tool policy, arguments, value-set snapshots) to every problem found.

No I/O, and no exceptions on bad input: a value of the wrong type, a missing
argument or an unavailable set is a finding in the result. A value is never
coerced to a default; a formatting slip is reported with the legal value it
normalises to, and the caller decides what to do with it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import NamedTuple, cast

import orjson

from argwatch.server.policy.arg_paths import format_path
from argwatch.server.policy.model import DEFAULT_MAX_ELEMENTS, ArgumentBinding, Failure, ToolPolicy
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.scoped import scope_key, usable_scope, value_of, within_scope
from argwatch.server.sets.snapshot import SetReading, ValueSetSnapshot, member_key
from argwatch.server.verdict.arg_values import locate
from argwatch.server.verdict.findings import (
    CheckResult,
    Problem,
    ProblemCode,
    Shape,
    SkippedCheck,
    SkipReason,
    ValueCheck,
)
from argwatch.server.verdict.tool_call import json_kind

MAX_VALUE_CHARS = 200
_MISSING = object()
_loose = normaliser(LOOSE)
_loose_retired = within_scope(_loose)  # as the retired history keeps loose forms (sets/retired.py)
# The session fields a scoped set's bindings read (SCOPE_FIELDS), as the validator hands them for a call.
NO_SESSION: Mapping[str, str] = {}


class MembersPlan(NamedTuple):
    """A tool's bound arguments, prepared once for the common case: every value present and in its set."""

    bindings: tuple[tuple[str, str, str], ...]  # (argument, value set, scope field or ""), in policy order
    checks: tuple[ValueCheck, ...]  # what check_arguments reports when every value is in its set
    # Whether every binding names a top-level argument: a path into one is judged by check_arguments
    # (never looked up as a key: a model could send a key named "items[*].sku").
    top_level: bool = True


def members_plan(tool: ToolPolicy) -> MembersPlan:
    return MembersPlan(
        # Keyed by the argument's own name: a quoted path (["a.b"]) names the key a.b.
        tuple((binding.path.top, binding.value_set, binding.scope) for binding in tool.arguments),
        tuple(ValueCheck(binding.name, binding.value_set, True, True) for binding in tool.arguments),
        not any(binding.path.nested for binding in tool.arguments),
    )


def all_in_sets(
    plan: MembersPlan,
    arguments: Mapping[str, object],
    readings: Mapping[str, SetReading | None],
    session: Mapping[str, str] = NO_SESSION,
) -> CheckResult | None:
    """check_arguments' result when every bound value is present and in its set, built from `plan`
    (no per-argument objects); None otherwise, and check_arguments then says what is wrong.
    `readings` must hold the tool's sets in order of first binding, as the validator builds it."""
    if not values_in_sets(plan, arguments, readings, session):
        return None
    # Each of the tool's sets is bound by one of these arguments, so none of them is None here.
    return CheckResult((), (), plan.checks, tuple(cast(Mapping[str, SetReading], readings).values()))


def values_in_sets(
    plan: MembersPlan,
    arguments: Mapping[str, object],
    readings: Mapping[str, SetReading | None],
    session: Mapping[str, str] = NO_SESSION,
) -> bool:
    """Whether every bound value is a string present at the top level and a member of its set (of the
    caller's own scope's keys, for a scoped set): exactly when check_arguments finds nothing."""
    if not plan.top_level:
        return False
    for argument, value_set, scope in plan.bindings:
        reading = readings[value_set]
        value = arguments.get(argument)
        if reading is None or value.__class__ is not str:
            return False
        if scope or reading.snapshot.scoped:  # a scoped set: only the call's own scope's key is a member
            caller = session.get(scope, "")
            if not scope or not reading.snapshot.scoped or not usable_scope(caller):
                return False
            value = scope_key(caller, value)
        if value not in reading.snapshot.members:
            return False
    return True


def check_arguments(
    tool: ToolPolicy,
    arguments: Mapping[str, object],
    readings: Mapping[str, SetReading | None],
    failures: Mapping[str, Failure],
    undisclosed: frozenset[str] = frozenset(),
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    session: Mapping[str, str] = NO_SESSION,
) -> CheckResult:
    """Checks every bound argument of `tool`: each value its path names, at most `max_elements` a binding.

    `readings` maps each bound set to its reading, or None when it is
    unavailable; `failures` says per set whether that fails open or closed.
    A stale reading is still checked against: staleness is the caller's to report.
    No member of a set in `undisclosed` (`disclose: none`) is written into a problem.
    A set scoped by a session field is judged within the scope `session` gives for that field only.
    """
    found = _Found([], [], [], [])
    for binding in tool.arguments:
        scope = session.get(binding.scope, "") if binding.scope else ""
        if not binding.path.nested:
            value = arguments.get(binding.path.top, _MISSING)
            if value is _MISSING:
                if binding.required:
                    found.problems.append(_missing(binding, binding.name))
                continue
            _check_value(binding, binding.name, value, readings, failures, undisclosed, found, scope)
            continue
        located = locate(arguments, binding.path, max_elements)
        if binding.required:
            found.problems.extend(_missing(binding, format_path(where)) for where in located.missing)
        for where, value, needed in located.misshapen:
            found.problems.append(_misshapen(binding, format_path(where), value, needed))
        reading = _reading(binding, readings)
        if located.found and reading is None:
            # One set that cannot be read is one fault, however many elements it leaves unchecked.
            _check_value(binding, binding.name, located.found[0][1], readings, failures, undisclosed, found, scope)
        elif located.found:
            assert reading is not None
            members = reading.snapshot.members if not (binding.scope or reading.snapshot.scoped) else None
            in_set = ValueCheck(binding.name, binding.value_set, True, True)
            for where, value in located.found:
                if members is not None and value.__class__ is str and value in members:  # the common case
                    found.value_checks.append(in_set)
                    if reading not in found.used:
                        found.used.append(reading)
                    continue
                _check_value(binding, format_path(where), value, readings, failures, undisclosed, found, scope)
        if located.unchecked:
            found.skipped.append(
                SkippedCheck(binding.name, binding.value_set, SkipReason.ELEMENTS_LIMIT, located.unchecked)
            )
    return CheckResult(tuple(found.problems), tuple(found.skipped), tuple(found.value_checks), tuple(found.used))


class _Found(NamedTuple):
    problems: list[Problem]
    skipped: list[SkippedCheck]
    value_checks: list[ValueCheck]
    used: list[SetReading]


def _check_value(
    binding: ArgumentBinding,
    where: str,
    value: object,
    readings: Mapping[str, SetReading | None],
    failures: Mapping[str, Failure],
    undisclosed: frozenset[str],
    found: _Found,
    scope: str = "",
) -> None:
    """One value of `binding` (at concrete path `where`) against its set; value checks count under the
    binding's pattern, problems name `where`. A scoped set's within `scope`, the call's."""
    reading = _reading(binding, readings)
    if reading is None:
        if failures.get(binding.value_set, Failure.OPEN) is Failure.CLOSED:
            found.problems.append(_unavailable(binding, where, value))
        else:
            found.skipped.append(SkippedCheck(binding.name, binding.value_set))
        return
    if reading not in found.used:
        found.used.append(reading)
    snapshot = reading.snapshot
    if not isinstance(value, str):
        found.value_checks.append(ValueCheck(binding.name, binding.value_set, False, False))
        found.problems.append(_wrong_type(binding, where, value))
        return
    if binding.scope and not usable_scope(scope):
        if (missing := _missing_scope(binding)) not in found.problems:  # one per binding, however many elements
            found.problems.append(missing)
        return
    if member_key(snapshot, value, scope) in snapshot.members:
        found.value_checks.append(ValueCheck(binding.name, binding.value_set, True, True))
        return
    rule = binding.normalisation
    in_set_normalised = member_key(snapshot, normaliser(rule)(value), scope) in snapshot.index_for(rule)
    found.value_checks.append(ValueCheck(binding.name, binding.value_set, False, in_set_normalised))
    hidden = binding.value_set in undisclosed
    found.problems.append(_out_of_set(binding, where, value, snapshot, in_set_normalised, hidden, scope))


def _reading(binding: ArgumentBinding, readings: Mapping[str, SetReading | None]) -> SetReading | None:
    """The binding's reading; None also for a copy scoped otherwise than the policy binds it (no copy to judge
    by: a key in a global set would be a value a call could send to pass)."""
    reading = readings.get(binding.value_set)
    return reading if reading is None or reading.snapshot.scoped is bool(binding.scope) else None


def classify_shape(value: str, snapshot: ValueSetSnapshot, scope: str = "") -> tuple[Shape, str]:
    """Why `value` (not a member) missed, and the legal value it is a slip of, if any; in a scoped set, within
    `scope` (and OTHER_SCOPE when another scope holds the value exactly: for the counts, not the caller)."""
    suggestion = snapshot.loose_index.get(member_key(snapshot, _loose(value), scope))
    if suggestion is not None:
        suggestion = value_of(suggestion) if snapshot.scoped else suggestion
        # One loose index serves both shapes: a slip that differs only in case is CASE.
        shape = Shape.CASE if value.casefold() == suggestion.casefold() else Shape.SEPARATOR
        return shape, suggestion
    key = member_key(snapshot, value, scope)
    if key in snapshot.retired or _loose_retired(key) in snapshot.loose_retired:
        return Shape.RETIRED, ""
    if snapshot.scoped and snapshot.holders.get(value) is not None:
        return Shape.OTHER_SCOPE, ""
    return Shape.INVENTED, ""


def as_json_text(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """The value as JSON text, cut to `limit` characters (with an ellipsis when cut)."""
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        # Nested deeper than orjson writes (254 levels; the parser takes 1,024): a bounded
        # rendering, never repr(), which raises RecursionError on such a value.
        text = _shallow_json(value, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SHALLOW_DEPTH = 16


def _shallow_json(value: object, limit: int, depth: int = 0) -> str:
    """JSON-like text of `value` down to _SHALLOW_DEPTH levels ("…" below), stopping once `limit` is passed."""
    if depth >= _SHALLOW_DEPTH:
        return "…"
    if isinstance(value, dict):
        parts: list[str] = []
        for key, item in value.items():
            parts.append(f"{orjson.dumps(str(key)).decode()}: {_shallow_json(item, limit, depth + 1)}")
            if sum(map(len, parts)) > limit:
                break
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        items: list[str] = []
        for item in value:
            items.append(_shallow_json(item, limit, depth + 1))
            if sum(map(len, items)) > limit:
                break
        return "[" + ", ".join(items) + "]"
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        # A string orjson will not write (a lone surrogate): the standard library escapes it.
        return json.dumps(str(value))


def _out_of_set(
    binding: ArgumentBinding,
    where: str,
    value: str,
    snapshot: ValueSetSnapshot,
    in_set_normalised: bool,
    undisclosed: bool,
    scope: str = "",
) -> Problem:
    shape, suggestion = classify_shape(value, snapshot, scope)
    shown = as_json_text(value)
    if shape is Shape.OTHER_SCOPE and binding.reveal_other_scopes:
        who = _SCOPE_WORDS.get(binding.scope, binding.scope)
        message = f"{where}: {shown} is not in {binding.value_set} for this {who}: it is another {who}'s"
    elif shape is Shape.OTHER_SCOPE:
        # Word for word an invented value's message: the caller is not told that another scope holds it (the
        # validator shows the shape as INVENTED too; the counts keep OTHER_SCOPE).
        message = f"{where}: {shown} is not in {binding.value_set}"
    elif undisclosed:
        # The shape is kept for the counts (the validator hides it from the caller: see `undisclosed`); the
        # message says neither the member the value slipped from nor that there is one.
        suggestion = ""
        message = f"{where}: {shown} is not in {binding.value_set}"
    elif suggestion:
        message = (
            f"{where}: {shown} is not in {binding.value_set} as written "
            f"({shape.value}); the legal value is {as_json_text(suggestion)}"
        )
    elif shape is Shape.RETIRED:
        message = f"{where}: {shown} was retired from {binding.value_set}{retirement_note(value, snapshot, scope)}"
        suggestion = _replacement(value, snapshot, scope)
    else:
        message = f"{where}: {shown} is not in {binding.value_set}"
    return Problem(
        code=ProblemCode.OUT_OF_SET,
        message=message,
        argument=where,
        value_set=binding.value_set,
        shape=shape,
        value=shown,
        suggestion=suggestion,
        in_set_normalised=in_set_normalised,
    )


def undisclosed(problem: Problem) -> Problem:
    """`problem` as the caller of a `disclose: none` set sees it: that the value is not in the set, and nothing
    of why (a case slip, a separator slip or a retired value each tell that a member near it exists)."""
    if problem.code is not ProblemCode.OUT_OF_SET and not problem.suggestion:
        return problem
    return replace(
        problem,
        message=f"{problem.argument}: {problem.value} is not in {problem.value_set}",
        shape=Shape.NONE,
        suggestion="",
        in_set_normalised=False,
    )


def concealed_scope(problem: Problem) -> Problem:
    """`problem` as a caller sees it unless the policy says reveal_other_scopes: another scope's member reads
    as an invented value (its message already does: see _out_of_set)."""
    return replace(problem, shape=Shape.INVENTED) if problem.shape is Shape.OTHER_SCOPE else problem


_SCOPE_WORDS = {"customer_id": "customer", "tenant": "tenant"}


def retirement_note(value: str, snapshot: ValueSetSnapshot, scope: str = "") -> str:
    """' on 2026-10-01, replaced by "OTHER"': as much of it as the source said ("" if nothing)."""
    info = snapshot.retirements.get(member_key(snapshot, value, scope))
    if info is None:
        return ""
    when = f" on {time.strftime('%Y-%m-%d', time.gmtime(info.retired_at))}" if info.retired_at is not None else ""
    by = f", replaced by {as_json_text(info.replaced_by)}" if info.replaced_by else ""
    return when + by


def _replacement(value: str, snapshot: ValueSetSnapshot, scope: str = "") -> str:
    info = snapshot.retirements.get(member_key(snapshot, value, scope))
    if info is None or member_key(snapshot, info.replaced_by, scope) not in snapshot.members:
        return ""
    return info.replaced_by


def _missing_scope(binding: ArgumentBinding) -> Problem:
    # No value: the model wrote nothing wrong (it is no offender, and nothing of it is sampled). Named by the
    # binding's pattern: one problem however many elements it leaves unjudged.
    who = _SCOPE_WORDS.get(binding.scope, binding.scope)
    return Problem(
        code=ProblemCode.MISSING_SCOPE,
        message=(
            f"{binding.name}: {binding.value_set} holds each {who}'s own values, and the call's session names no "
            f"{who} (session.{binding.scope} is empty or unusable): the value cannot be checked"
        ),
        argument=binding.name,
        value_set=binding.value_set,
    )


def _missing(binding: ArgumentBinding, where: str) -> Problem:
    return Problem(
        code=ProblemCode.MISSING_REQUIRED,
        message=f"{where}: required, missing; expected a value from {binding.value_set}",
        argument=where,
        value_set=binding.value_set,
    )


def _misshapen(binding: ArgumentBinding, where: str, value: object, needed: str) -> Problem:
    """A value where the binding's path goes on (an object's key, an array's elements) that cannot hold it."""
    return Problem(
        code=ProblemCode.WRONG_TYPE,
        message=f"{where}: expected {needed} holding {binding.name}, got {_json_type(value)}",
        argument=where,
        value_set=binding.value_set,
        value=as_json_text(value),
        expected=needed,
    )


def _wrong_type(binding: ArgumentBinding, where: str, value: object) -> Problem:
    kind = _json_type(value)
    return Problem(
        code=ProblemCode.WRONG_TYPE,
        message=f"{where}: expected a string from {binding.value_set}, got {kind}",
        argument=where,
        value_set=binding.value_set,
        value=as_json_text(value),
        expected=f"a string from {binding.value_set}",
    )


def _unavailable(binding: ArgumentBinding, where: str, value: object) -> Problem:
    return Problem(
        code=ProblemCode.CHECK_UNAVAILABLE,
        message=(f"{where}: {binding.value_set} could not be read and this check fails closed"),
        argument=where,
        value_set=binding.value_set,
        value=as_json_text(value),
    )


def _json_type(value: object) -> str:
    kind = json_kind(value)
    return f"{kind} ({as_json_text(value, 40)})" if kind == "a number" else kind
