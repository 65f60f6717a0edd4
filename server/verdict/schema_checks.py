"""JSON Schema (draft 2020-12) checks of a tool's arguments, as problems in argwatch's vocabulary.

Two validators, each for what it does best:
- jsonschema-rs (Rust) answers "is this call clean?" many times faster than the
  pure-Python jsonschema (docs/performance.md). Clean calls are the common
  case, so most calls stop there. It implements 2020-12 in full (prefixItems,
  unevaluatedProperties, $dynamicRef), which MCP `inputSchema` uses; the
  compiled Python validators stop at draft 07 and ignore those keywords.
- jsonschema (Python) lists every problem of a call the fast check did not pass,
  with the paths and keywords our problem codes and messages are built from, and
  is the judge whenever the two disagree.

Where they disagree (tests/unit/test_schema_fast_path.py pins the cases), the
Rust validator is the stricter one, so the Python one decides: `email` (Python
asks only for an @), and non-finite numbers, which are not numbers. The formats
both check alike (uri, date-time, hostname, duration, ...) come from the
format packages pyproject.toml installs for jsonschema; a format the full check
has no checker for is an annotation, and coverage (policy/coverage.py) does
not count it. One case goes the
other way: it computes multipleOf exactly (0.07 is a multiple of 0.01), where
Python's float division says it is not; there the exact answer stands. On
patterns they agree: both search with the Rust regex engine, in time linear in
the text (policy/linear_regex.py). The schemas are compiled with the policy
(policy/schema_compile.py), so `\\d` and `\\w` are ASCII and `$` matches only at
the very end.

A value that breaks several keywords (too short, and not a uri) is one problem with every reason
in it: one problem per code and argument. tests/unit/test_catalogues.py holds all of this against
jsonschema on real tool catalogues.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace

from jsonschema import Draft202012Validator
from jsonschema._utils import find_additional_properties
from jsonschema.exceptions import ValidationError

from argwatch.server.policy.arg_paths import format_path
from argwatch.server.policy.schema_compile import CompiledSchema
from argwatch.server.verdict.findings import Problem, ProblemCode

MAX_SCHEMA_ERRORS = 256  # schema errors listed per call (the same default as limits.max_elements)
_CODES = {
    "required": ProblemCode.MISSING_REQUIRED,
    "additionalProperties": ProblemCode.UNEXPECTED_ARGUMENT,
    "unevaluatedProperties": ProblemCode.UNEXPECTED_ARGUMENT,
    "type": ProblemCode.WRONG_TYPE,
    "enum": ProblemCode.OUT_OF_SET,
    "const": ProblemCode.OUT_OF_SET,
}


def schema_problems(schema: CompiledSchema, arguments: Mapping[str, object]) -> list[Problem]:
    """Every schema violation, as problems (one per missing or unexpected argument)."""
    fast = schema.fast
    if fast is not None:
        try:
            if fast.is_valid(arguments):
                return []
        except (ValueError, OverflowError):  # a value it cannot convert (a lone surrogate): the full check decides
            pass
    try:
        return _listed_problems(schema, arguments)
    except RecursionError:  # nesting deep enough to exhaust the library's recursion: a verdict all the same
        return [
            Problem(
                ProblemCode.MALFORMED_ARGUMENTS,
                "arguments: nested too deeply to check against the schema",
                expected="arguments nested less deeply",
            )
        ]


def _listed_problems(schema: CompiledSchema, arguments: Mapping[str, object]) -> list[Problem]:
    from argwatch.server.verdict.set_checks import as_json_text  # the checker imports nothing of this module

    validator: Draft202012Validator = schema.full
    problems: list[Problem] = []
    missing_seen: set[str] = set()  # jsonschema raises one `required` error per missing name, each naming all
    # The library finds errors lazily: past MAX_SCHEMA_ERRORS of them (100,000 wrong elements would be
    # seconds of the event loop and a verdict too large to send) the rest are said to exist, not listed.
    found = list(itertools.islice(validator.iter_errors(arguments), MAX_SCHEMA_ERRORS + 1))
    if len(found) > MAX_SCHEMA_ERRORS:
        del found[MAX_SCHEMA_ERRORS:]
        problems_past_limit = True
    else:
        problems_past_limit = False
    for error in sorted(found, key=lambda e: list(e.absolute_path)):
        code = _CODES.get(str(error.validator), ProblemCode.OUT_OF_RANGE)
        path = list(error.absolute_path)
        if error.validator is None or (error.validator == "not" and error.validator_value == {}):
            # A `false` schema: nothing is valid there. Under an object's key, the key is one not to send.
            in_object = bool(error.absolute_path) and isinstance(error.absolute_path[-1], str)
            problems.append(_refused_by_false(path, error.instance, in_object))
            continue
        if code is ProblemCode.MISSING_REQUIRED:
            for name in _missing(error):
                argument = format_path([*path, name])
                if argument not in missing_seen:
                    missing_seen.add(argument)
                    problems.append(Problem(code, f"{argument}: required, missing", argument=argument))
            continue
        if code is ProblemCode.UNEXPECTED_ARGUMENT:
            instance = error.instance if isinstance(error.instance, dict) else {}
            for name in _unexpected(error):
                argument = format_path([*path, name])
                problems.append(
                    Problem(
                        code,
                        f"{argument}: not an argument of this tool",
                        argument=argument,
                        value=as_json_text(instance.get(name)),
                    )
                )
            continue
        argument = format_path(path)
        problems.append(
            Problem(
                code,
                f"{argument or 'arguments'}: {error.message}",
                argument=argument,
                value=as_json_text(error.instance),
                expected=expected_by(str(error.validator), error.validator_value),
                enum_pointer=schema.enums.get(id(error.validator_value), "") if error.validator == "enum" else "",
            )
        )
    if problems_past_limit:
        problems.append(
            Problem(
                ProblemCode.MALFORMED_ARGUMENTS,
                f"arguments: more than {MAX_SCHEMA_ERRORS} schema problems; the first are listed, fix them and "
                "call again to see the rest",
                expected=f"arguments with fewer than {MAX_SCHEMA_ERRORS} faults",
            )
        )
    return _one_per_fault(problems)


def _one_per_fault(problems: list[Problem]) -> list[Problem]:
    """One problem per (code, argument): a value that breaks two keywords (too short, and not a uri) is one
    fault, with both reasons in its message and what it expects, and is counted once."""
    merged: dict[tuple[ProblemCode, str], Problem] = {}
    for problem in problems:
        key = (problem.code, problem.argument)
        first = merged.get(key)
        if first is None:
            merged[key] = problem
        elif problem.message != first.message:
            reason = problem.message.split(": ", 1)[-1]
            expected = " and ".join(part for part in (first.expected, problem.expected) if part)
            # Missed an enum and another keyword (allOf): no one enum holds its valid values, so Repair lists none.
            pointer = _NO_ONE_ENUM if first.enum_pointer or problem.enum_pointer else ""
            merged[key] = replace(first, message=f"{first.message}; {reason}", expected=expected, enum_pointer=pointer)
    return list(merged.values())


_NO_ONE_ENUM = "#no-one-enum"  # an enum_pointer that names no enum (it is no JSON pointer): nothing is listed


def _refused_by_false(path: list[str | int], instance: object, in_object: bool) -> Problem:
    from argwatch.server.verdict.set_checks import as_json_text

    if not path:  # the tool's whole schema is `false`
        return Problem(
            ProblemCode.OUT_OF_RANGE,
            "arguments: this tool's schema is false, so no call of it is valid",
            expected="no call: the tool takes none",
        )
    argument = format_path(path)
    return Problem(
        ProblemCode.UNEXPECTED_ARGUMENT if in_object else ProblemCode.OUT_OF_RANGE,
        f"{argument}: not allowed (its schema is false)",
        argument=argument,
        value=as_json_text(instance),
        expected="nothing here: leave it out",
    )


_TYPES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "a boolean (true or false)",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
_BOUNDS = {
    "minimum": "a number of at least {}",
    "maximum": "a number of at most {}",
    "exclusiveMinimum": "a number above {}",
    "exclusiveMaximum": "a number below {}",
    "multipleOf": "a multiple of {}",
    "minLength": "a string of at least {} characters",
    "maxLength": "a string of at most {} characters",
    "minItems": "an array of at least {} items",
    "maxItems": "an array of at most {} items",
    "uniqueItems": "an array without repeated items",
    "minProperties": "an object with at least {} keys",
    "maxProperties": "an object with at most {} keys",
    "pattern": "a string matching the pattern {}",
    "format": "a string in the format {}",
}


# An enum's members named in `expected`, the summary people and logs read. Repair lists the enum itself, up to
# repair.list_limit, from the problem's enum_pointer (repair/legal_values.py).
_ENUM_IN_WORDS = 20


def expected_by(keyword: str, value: object) -> str:
    """What a schema keyword asks for, in words the model can act on ("an integer", "at most 5000")."""
    from argwatch.server.verdict.set_checks import as_json_text

    if keyword == "type":
        kinds = value if isinstance(value, list) else [value]
        return " or ".join(_TYPES.get(str(kind), str(kind)) for kind in kinds)
    if keyword == "enum" and isinstance(value, list):
        shown = ", ".join(as_json_text(item, 60) for item in value[:_ENUM_IN_WORDS])
        more = len(value) - _ENUM_IN_WORDS
        return f"one of {shown}" + (f" (and {more} more)" if more > 0 else "")
    if keyword == "const":
        return f"exactly {as_json_text(value, 80)}"
    template = _BOUNDS.get(keyword)
    if template is None:
        return ""
    return template.format(value if keyword != "pattern" else as_json_text(value, 120))


def _missing(error: ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    required = error.validator_value if isinstance(error.validator_value, list) else []
    return [name for name in required if isinstance(name, str) and name not in instance]


def _unexpected(error: ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    if error.validator == "additionalProperties" and isinstance(error.schema, dict):
        # The library's own reckoning (properties, then patternProperties): a name is never read back
        # from the message, where a quote in it ("it's") once made every argument look unexpected.
        return list(find_additional_properties(instance, error.schema))
    # unevaluatedProperties names each in its message as repr() writes it.
    return [name for name in instance if repr(name) in error.message]
