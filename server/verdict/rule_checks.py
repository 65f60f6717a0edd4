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

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import cel

from argwatch.server.policy.arg_paths import EVERY, format_path, parse_path
from argwatch.server.policy.model import DEFAULT_MAX_ELEMENTS, MAX_SQUARE_ELEMENTS, Failure, Rule, Steps, ToolPolicy
from argwatch.server.policy.rule_arrays import EACH_VARIABLE
from argwatch.server.verdict.findings import Problem, ProblemCode, SkippedCheck, SkipReason
from argwatch.server.verdict.rule_elements import Fault, Parts, elements, is_json_type, prepare
from argwatch.server.verdict.rule_functions import FUNCTIONS
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
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> RuleOutcome:
    outcome = RuleOutcome([], [], [])
    if not tool.rules:
        return outcome
    runnable = []
    for rule in tool.rules:
        if not rule.records <= found.keys():
            continue
        # Compared, it could pass (args.id != 5 holds for "5"): not compared.
        if mistyped(rule.argument_types.items(), arguments):
            outcome.errors.append(rule.name)
            if rule.on_error is Failure.OPEN:
                outcome.skipped.append(SkippedCheck(rule.argument, f"rule.{rule.name}"))
            else:
                outcome.problems.append(_not_evaluated(rule, arguments))
            continue
        if rule.arrays is not None:  # over arrays: typed, bounded and run on its own (rule_elements.py)
            bound = min(max_elements, MAX_SQUARE_ELEMENTS) if rule.arrays.squares else max_elements
            _run_over_arrays(rule, arguments, found, session, bound, outcome)
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
        if rule.flat_program is not None and bind_paths(rule.flat_paths, roots, variables):
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
                "record": _records(found),
                "session": dict(session),
            }
        )
        _run(nested, context, outcome, roots, arguments, flat=False)
    return outcome


def _records(found: Mapping[str, Any]) -> dict[str, object]:
    """The records as CEL reads them: each a map, and a binding of many ids (`items[*].order_id`) the list of
    its records (records/checks.py), bounded there by limits.max_elements."""
    return {
        name: [dict(one) for one in attrs] if isinstance(attrs, list) else dict(attrs) for name, attrs in found.items()
    }


def bind_paths(
    paths: Iterable[tuple[str, tuple[str, ...]]], roots: Mapping[str, Any], variables: dict[str, object]
) -> bool:
    """Adds the variables of a flat rule's `paths` (Rule.flat_paths), each read from `roots`; False (adding
    none) when a field one reads is absent. Also the clean path's (records/clean_path.py)."""
    values = []
    for variable, path in paths:
        node: Any = roots[path[0]]
        for part in path[1:]:
            # A dict first: the ABC's isinstance is a Python-level call, several a call.
            if (node.__class__ is not dict and not isinstance(node, Mapping)) or part not in node:
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


def mistyped(types: Iterable[tuple[str, tuple[str, ...]]], arguments: Mapping[str, object]) -> bool:
    """Whether an argument a rule reads has none of the JSON types `types` allows it (Rule.argument_types)."""
    for name, kinds in types:
        if name in arguments:
            value = arguments[name]
            for kind in kinds:
                if is_json_type(value, kind):
                    break
            else:
                return True
    return False


def _run_over_arrays(
    rule: Rule,
    arguments: Mapping[str, object],
    found: Mapping[str, Mapping[str, Any]],
    session: Mapping[str, str],
    max_elements: int,
    outcome: RuleOutcome,
) -> None:
    """A rule reading arrays. Written whole (`args.items.all(i, ...)`), it is judged once and a problem names
    its `argument`; with `each: items[*]`, once per element, and a problem names that element (items[2])."""
    assert rule.arrays is not None
    prepared = prepare(rule, arguments, found, max_elements)
    # CEL is handed only what the expression reads: an `each` rule's list is not converted again per element.
    read = {name: value for name, value in prepared.arguments.items() if name in rule.arguments}
    roots = {"args": read, "record": found, "session": session}
    nested = {"args": read, "record": _records(found), "session": dict(session)}
    # An each rule's element variables are bound per element, the others once.
    per_element = tuple(pair for pair in rule.flat_paths if pair[1][0] == EACH_VARIABLE)
    once = tuple(pair for pair in rule.flat_paths if pair[1][0] != EACH_VARIABLE)
    flat: dict[str, object] = {}
    flat_ok = rule.flat_program is not None and bind_paths(once, roots, flat)
    functions = FUNCTIONS if rule.arrays.sums else None
    each = rule.arrays.each
    if not each:
        program, base = (rule.flat_program, flat) if flat_ok else (rule.program, nested)
        faults = prepared.faults + prepared.over  # over the bound, a total or an exists() cannot be judged
        if faults:
            # Only too long a list: none of its elements was judged; a fault of type is no count of elements.
            unchecked = 0 if prepared.faults else sum(fault.length for fault in prepared.over)
            _unevaluated(rule, outcome, rule.argument, _whys(faults), arguments, unchecked=unchecked)
        else:
            _judge(rule, program, outcome, base, functions, roots, arguments, rule.argument)
        return
    # A fault within one element leaves that element unjudged; the each list itself cut to the bound leaves
    # the rest unjudged; any other (a record list too long, another list a test such as exists() reads) the rule.
    faulty: dict[Parts, str] = {}
    cut: list[Fault] = []
    whole: list[Fault] = []
    for fault in [*prepared.faults, *prepared.over]:
        if _matches(fault.parts, each):
            faulty.setdefault(fault.parts[: len(each)], fault.why)
        elif fault in prepared.over and len(fault.parts) == len(each) - 1 and _matches(fault.parts, each[:-1]):
            cut.append(fault)
        else:
            whole.append(fault)
    if whole:
        first = whole[0].parts
        if first[0] == "record":
            _unevaluated(rule, outcome, rule.argument, _whys(whole), arguments)
        else:
            _unevaluated(rule, outcome, format_path(first), _whys(whole), arguments, first)
        return
    rest = _element_argument(rule)
    for parts, element in elements(prepared.arguments, each):
        at = (*parts, *rest) if rest is not None else None
        # Written only where a problem names it: most elements pass, and writing each path costs more than CEL.
        argument = _LAZY if at is not None else rule.argument
        if parts in faulty:
            _unevaluated(rule, outcome, argument, faulty[parts], arguments, at)
            continue
        item_roots = {**roots, EACH_VARIABLE: element}
        variables = dict(flat)
        if flat_ok and bind_paths(per_element, {EACH_VARIABLE: element}, variables):
            _judge(rule, rule.flat_program, outcome, variables, functions, item_roots, arguments, argument, at)
        else:  # a field the element lacks: the nested program says what CEL says of it (has() may allow it)
            variables = {**nested, EACH_VARIABLE: element}
            _judge(rule, rule.program, outcome, variables, functions, item_roots, arguments, argument, at)
    for fault in cut:  # the elements past the bound were not judged: never a silent pass
        unchecked = fault.length - max_elements
        _unevaluated(rule, outcome, format_path(fault.parts), fault.why, arguments, fault.parts, unchecked)


def _matches(parts: Parts, steps: Steps) -> bool:
    """Whether a concrete path lies at or within a pattern's values (items[2].sku within items[*])."""
    return len(parts) >= len(steps) and all(
        part == step or (step is EVERY and isinstance(part, int)) for part, step in zip(parts, steps, strict=False)
    )


def _whys(faults: list[Fault]) -> str:
    return "; ".join(fault.why for fault in faults[:3]) + (f"; {len(faults) - 3} more" if len(faults) > 3 else "")


def _judge(
    rule: Rule,
    program: Any,
    outcome: RuleOutcome,
    variables: dict[str, object],
    functions: dict[str, Callable[..., Any]] | None,
    roots: Mapping[str, Any],
    arguments: Mapping[str, object],
    argument: str,
    at: Parts | None = None,
) -> None:
    try:
        holds = program.execute(cel.Context(variables=variables, functions=functions))
    except Exception:  # an absent field, an overflow, a sum() refused: the rule did not run
        _unevaluated(rule, outcome, argument, "", arguments, at)
        return
    if holds is not True:
        if argument is _LAZY and at is not None:
            argument = format_path(at)
        outcome.problems.append(_rule_problem(rule, roots, arguments, argument, at))


_LAZY = "\0path"  # stands for format_path(at) until a problem needs it written


def _element_argument(rule: Rule) -> tuple[str, ...] | None:
    """What follows the element in the path a problem of an `each` rule names (("quantity",) for
    items[*].quantity, () for items[*]); None for an argument outside the elements (the whole list)."""
    assert rule.arrays is not None
    return _after_element(rule.argument, rule.arrays.each)


@functools.cache  # by policy text: as many entries as the policies served have each rules
def _after_element(argument: str, each: Steps) -> tuple[str, ...] | None:
    steps = parse_path(argument).steps if argument else each
    rest = steps[len(each) :]
    if steps[: len(each)] != each or EVERY in rest:
        return None
    return tuple(step for step in rest if step is not None)


def _unevaluated(
    rule: Rule,
    outcome: RuleOutcome,
    argument: str,
    why: str,
    arguments: Mapping[str, object],
    at: Parts | None = None,
    unchecked: int = 0,
) -> None:
    """A rule (or one element's turn of it) that could not be judged: counted once per call, then a
    RULE_NOT_EVALUATED problem naming the path, or with on_error: open one skipped check per rule (its
    `unchecked` elements, when a list longer than limits.max_elements is why, counted as not checked)."""
    if argument is _LAZY and at is not None:
        argument = format_path(at)
    if rule.name not in outcome.errors:
        outcome.errors.append(rule.name)
    if rule.on_error is Failure.OPEN:
        reason = SkipReason.ELEMENTS_LIMIT if unchecked else SkipReason.UNAVAILABLE
        skipped = SkippedCheck(rule.argument, f"rule.{rule.name}", reason, unchecked)
        same = [i for i, s in enumerate(outcome.skipped) if s[:3] == skipped[:3]]
        if not same:
            outcome.skipped.append(skipped)
        elif unchecked:
            earlier = outcome.skipped[same[0]]
            outcome.skipped[same[0]] = earlier._replace(unchecked=earlier.unchecked + unchecked)
        return
    outcome.problems.append(_not_evaluated(rule, arguments, argument, why, at))


def _not_evaluated(
    rule: Rule, arguments: Mapping[str, object], argument: str | None = None, why: str = "", at: Parts | None = None
) -> Problem:
    argument = rule.argument if argument is None else argument
    read = why or "; ".join(_what_was_sent(name, arguments) for name in sorted(rule.arguments)) or "its fields"
    value = _value_at(arguments, argument, at)
    return Problem(
        ProblemCode.RULE_NOT_EVALUATED,
        f"{argument or 'arguments'}: could not be checked by the rule {rule.name} ({read}), so the call "
        "cannot pass it; send every value it reads, each as the JSON type the tool takes",
        argument=argument,
        value_set=f"rule.{rule.name}",
        value=value,
    )


def _what_was_sent(name: str, arguments: Mapping[str, object]) -> str:
    if name not in arguments:
        return f"{name} is missing"
    value = arguments[name]
    return f"{name} is {json_kind(value)} {as_json_text(value, 40)}"


def _rule_problem(
    rule: Rule,
    context: Mapping[str, Any],
    arguments: Mapping[str, object],
    argument: str | None = None,
    at: Parts | None = None,
) -> Problem:
    argument = rule.argument if argument is None else argument
    message = _PLACEHOLDER.sub(lambda match: _lookup(context, match.group(1)), rule.message)
    return Problem(
        ProblemCode(rule.code),
        f"{argument or 'arguments'}: {message}",
        argument=argument,
        value_set=f"rule.{rule.name}",
        value=_value_at(arguments, argument, at),
    )


def _value_at(arguments: Mapping[str, object], argument: str, at: Parts | None) -> str:
    """The JSON text of the value a problem names: the argument, or the value at the concrete path `at`."""
    if at is None:
        return as_json_text(arguments[argument]) if argument in arguments else ""
    node: Any = arguments
    for part in at:
        there = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (there or (isinstance(node, Mapping) and part in node)):
            return ""
        node = node[part]
    return as_json_text(node)


def _lookup(context: Mapping[str, Any], path: str) -> str:
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return "{" + path + "}"
        node = node[part]
    return as_json_text(node, 80) if not isinstance(node, str) else node
