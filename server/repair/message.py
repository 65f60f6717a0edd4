"""Builds the model-facing error for a rejected call: what failed, the legal values, that nothing ran, what to do.

Pure: it reads the problems, the current snapshots and the policy, and returns
text and the values offered. A value set and a schema enum are listed alike
(legal_values.py): whole up to `repair.list_limit`, else the nearest few to the
value given plus the count, and then the model is told where to find the rest,
never that what it was shown is all there is. A set's `disclose` bounds that:
`nearest` never lists the whole set, and `none` shows no member at all (not even
a retirement's replacement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from argwatch.server.policy.arg_paths import pattern_of
from argwatch.server.policy.model import Disclosure, Policy, ToolPolicy
from argwatch.server.repair.legal_values import (
    LegalValues,
    as_strings,
    enum_at,
    enum_values_for,
    legal_values_for,
    unquote,
)
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.verdict.findings import Problem, ProblemCode, Shape
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord
from argwatch.server.verdict.set_checks import retirement_note


@dataclass(frozen=True, slots=True)
class RepairAdvice:
    """Everything Repair returns."""

    call_id: str
    message: str
    problems: tuple[Problem, ...]
    legal_values: tuple[LegalValues, ...]
    attempt: int
    give_up: bool


def build_advice(
    *,
    call_id: str,
    tool: str,
    policy: Policy,
    problems: Sequence[Problem],
    snapshots: Mapping[str, ValueSetSnapshot | None],
    attempt: int,
    give_up_reason: str,
    repeat_of: OperationRecord | None = None,
    more_problems: int = 0,
) -> RepairAdvice:
    """The repair message for a rejected call."""
    if repeat_of is not None:
        message = repeat_message(tool, policy, repeat_of, give_up_reason)
        return RepairAdvice(call_id, message, tuple(problems), (), attempt, bool(give_up_reason))
    config = policy.repair
    lines = [f"The call to {tool} was rejected by argument validation. Nothing was executed."]
    offered: list[LegalValues] = []
    hints: list[str] = []
    unlisted: list[str] = []  # arguments whose valid values were not all shown
    tool_policy = policy.tools.get(tool)
    bindings = {b.name: b for b in tool_policy.arguments} if tool_policy else {}
    for problem in problems:
        snapshot = snapshots.get(problem.value_set) if problem.value_set else None
        set_config = policy.value_sets.get(problem.value_set) if problem.value_set else None
        disclose = set_config.disclose if set_config is not None else Disclosure.LIST
        if disclose is Disclosure.NONE:
            snapshot = None  # nothing of the set is read: not a retirement's replacement, not a member
        enum = _missed_enum(problem, tool_policy)
        lines.append(f"- {_describe(problem, policy, snapshot, enum is not None)}")
        legal: LegalValues | None = None
        if problem.code in _OFFERS_VALUES and disclose is Disclosure.NONE:
            lines.append(
                "  Its valid values are not shown. Use a value from an earlier tool result or from the user; "
                "never a guessed one."
            )
        elif problem.code in _OFFERS_VALUES and snapshot is not None:
            legal = legal_values_for(problem, snapshot, config, disclose)
            offered.append(legal)
            lines.append(_once(f"  {_render_legal(legal, [_quoted(value) for value in legal.values])}", lines))
        elif enum is not None:
            legal = enum_values_for(problem, enum, config)
            lines.append(_once(f"  {_render_legal(legal, legal.values)}", lines))  # JSON text already: "A", 3, null
            if (as_offered := as_strings(legal)) is not None:
                offered.append(as_offered)
        if _not_all_listed(problem, legal):
            unlisted.append(pattern_of(problem.argument))  # items[*].sku once, however many elements missed
        binding = bindings.get(problem.argument) or bindings.get(pattern_of(problem.argument))
        if binding is not None and binding.hint and binding.hint not in hints:
            hints.append(binding.hint)
    if more_problems:
        lines.append(f"- ... and {more_problems} more problems like these.")
    if give_up_reason:
        lines.append(
            f"Do not call {tool} again in this conversation: {give_up_reason}. "
            "Tell the user what failed and ask how to proceed."
        )
    elif all(problem.code is ProblemCode.MISSING_SCOPE for problem in problems):
        # The agent's integration sent no session: no argument the model could change would pass.
        lines.append(
            f"What to do: do not call {tool} again with other values; no argument is at fault. This "
            "conversation carries no customer session, so the call cannot be checked: tell the user it cannot "
            "be done now."
        )
    else:
        lines.append(_what_to_do(tool, tool_policy, unlisted))
        lines.extend(hints)
        lines.append(f"(attempt {attempt} of {config.max_attempts})")
    return RepairAdvice(
        call_id=call_id,
        message="\n".join(lines),
        problems=tuple(problems),
        legal_values=tuple(offered),
        attempt=attempt,
        give_up=bool(give_up_reason),
    )


def repeat_message(tool: str, policy: Policy, earlier: OperationRecord, give_up_reason: str) -> str:
    """A refused repeat: what happened, what the gateway knows of the earlier call, whether the side
    effect may already have happened, and what to do instead."""
    tool_policy = policy.tools.get(tool)
    side_effect = tool_policy.side_effect if tool_policy is not None else None
    status_tool = side_effect.status_tool if side_effect is not None else ""
    names = side_effect.same_operation if side_effect is not None else ()
    same = f"the same {_listed(names)}" if names else "the same arguments"
    when = datetime.fromtimestamp(earlier.seen_at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [
        f"The call to {tool} was not executed: it repeats an earlier call of the same operation "
        f"({tool} with {same} in this conversation).",
        f"- The earlier call: {earlier.call_id}, at {when}; idempotency key {earlier.key}; "
        f"{earlier.calls} calls of this operation so far, this one included.",
    ]
    if earlier.outcome is OperationOutcome.SUCCEEDED:
        lines.append(
            f"- It succeeded: its effect has already happened. Running {tool} again would do it a second time."
        )
        lines.append(f"What to do: do not call {tool} again for this. Tell the user it is already done.")
        return "\n".join(lines)
    known = "was reported unknown" if earlier.outcome is OperationOutcome.UNKNOWN else "was never reported"
    lines.append(
        f"- Its outcome {known}: it may have succeeded (a timeout does not mean it failed), so running "
        f"{tool} again could do it twice."
    )
    if give_up_reason:
        lines.append(
            f"Do not call {tool} again in this conversation: {give_up_reason}. Tell the user the earlier "
            "attempt may already have gone through, and ask them to check before anything is retried."
        )
    elif status_tool:
        lines.append(
            f"What to do: call {status_tool} first to see whether the earlier call took effect. If it did, do "
            f"not call {tool} again; tell the user it is done. If it did not, you may then call {tool} again "
            "with the same arguments."
        )
    else:
        lines.append(
            f"What to do: do not call {tool} again. Tell the user the earlier attempt may already have gone "
            "through, and ask them to check before it is retried."
        )
    return "\n".join(lines)


def _what_to_do(tool: str, tool_policy: ToolPolicy | None, unlisted: Sequence[str]) -> str:
    """The closing advice. "Do not guess a value that is not listed" only where every valid value was listed:
    past repair.list_limit (or with a set that is not shown) the value meant may be valid and unlisted, so the
    model is told where to get it instead."""
    start = f"What to do: call {tool} again with each argument above set to one of its valid values, copied exactly."
    if not unlisted:
        return f"{start} Do not guess a value that is not listed; if none fits, ask the user."
    names = list(dict.fromkeys(unlisted))
    lookups = [(name, found) for name in names if (found := _lookup_tool(tool_policy, name))]
    if len(lookups) == 1 and len(names) == 1:
        source = f"look it up with {lookups[0][1]}, take it from an earlier tool result, or ask the user"
    elif lookups:
        found_with = _listed([f"{name} with {found}" for name, found in lookups])
        source = f"look up {found_with}, take it from an earlier tool result, or ask the user"
    else:
        source = "take it from an earlier tool result or ask the user"
    return (
        f"{start} Not every valid value of {_listed(names)} is listed above, so the one meant may be valid though "
        f"not listed: {source}. Never guess one."
    )


def _not_all_listed(problem: Problem, legal: LegalValues | None) -> bool:
    """Whether the argument takes values that the message did not all list: a set or enum past the limit or not
    shown, or a record's ids (never listed: a miss there is NOT_FOUND or NOT_OWNED)."""
    if legal is not None:
        return not legal.complete
    if problem.enum_pointer:
        return True
    return bool(problem.value_set) and problem.code in _OFFERS_VALUES | _NAMES_NO_RECORD


def _lookup_tool(tool_policy: ToolPolicy | None, argument: str) -> str:
    """The tool the policy names for finding a real value of `argument` (a record's lookup_tool), or ""."""
    if tool_policy is None:
        return ""
    return next((r.lookup_tool for r in tool_policy.records if r.id_argument == argument and r.lookup_tool), "")


def _missed_enum(problem: Problem, tool_policy: ToolPolicy | None) -> Sequence[object] | None:
    """The members of the schema enum `problem` missed, read from the tool's schema as the policy has it now."""
    if not problem.enum_pointer or tool_policy is None:
        return None
    return enum_at(tool_policy.schema, problem.enum_pointer)


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


_OFFERS_VALUES = {ProblemCode.OUT_OF_SET, ProblemCode.WRONG_TYPE, ProblemCode.MISSING_REQUIRED}
_NAMES_NO_RECORD = {ProblemCode.NOT_FOUND, ProblemCode.NOT_OWNED}  # value_set: the record ("record.order")
_SCHEMA_BOUNDS = {ProblemCode.OUT_OF_RANGE, ProblemCode.OUT_OF_SET}


def _describe(problem: Problem, policy: Policy, snapshot: ValueSetSnapshot | None, enum_listed: bool) -> str:
    if enum_listed:  # its members follow, as a set's do
        return f"{problem.argument or 'arguments'}: {problem.value} is not a valid value."
    if problem.expected and not problem.value_set and problem.code in _SCHEMA_BOUNDS:  # the tool's schema said so
        return f"{problem.argument or 'arguments'}: {problem.value} is not accepted; expected {problem.expected}."
    if problem.code is ProblemCode.OUT_OF_SET:
        if problem.shape is Shape.RETIRED:
            note = retirement_note(unquote(problem.value), snapshot) if snapshot is not None else ""
            return f"{problem.argument}: {problem.value} is no longer a valid value (it was retired{note})."
        if problem.suggestion:
            return (
                f"{problem.argument}: {problem.value} is not a valid value as written; "
                f'the valid value is "{problem.suggestion}" (exact spelling and case).'
            )
        return f"{problem.argument}: {problem.value} is not a valid value."
    if problem.code is ProblemCode.WRONG_TYPE:
        expected = problem.expected or (f"a string from {problem.value_set}" if problem.value_set else "another type")
        return f"{problem.argument}: expected {expected}, got {problem.value}."

    if problem.code is ProblemCode.MISSING_REQUIRED:
        return f"{problem.argument}: required, but missing."
    if problem.code is ProblemCode.UNKNOWN_TOOL:
        tools = sorted(policy.tools)
        shown = ", ".join(tools[: policy.repair.list_limit])
        return f"There is no tool named {problem.value}. Tools: {shown}."
    if problem.code is ProblemCode.MALFORMED_ARGUMENTS:
        return f"The arguments are not a JSON object ({problem.message}). Send one JSON object."
    return problem.message


def _render_legal(legal: LegalValues, shown: Sequence[str]) -> str:
    listed = ", ".join(shown)
    if legal.complete:
        return f"Valid values ({legal.total}): {listed}."
    return f"The {len(legal.values)} closest of {legal.total} valid values: {listed}."


def _once(rendered: str, lines: list[str]) -> str:
    # Many elements of one array from one set or enum: its values once, not once per element.
    return rendered if rendered not in lines else "  Its valid values are listed above."


def _quoted(member: str) -> str:
    return f'"{member}"'
