"""JSON Schema (draft 2020-12) checks of a tool's arguments, with jsonschema, as problems in argwatch's vocabulary.

jsonschema, not a faster compiled validator: those implement drafts up to 07 and
silently ignore 2020-12 keywords (prefixItems, unevaluatedProperties,
$dynamicRef), which MCP `inputSchema` uses. It costs ~40 us a call for a small
schema here (measured); tools without a schema pay nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from argwatch.server.findings import Problem, ProblemCode

_CODES = {
    "required": ProblemCode.MISSING_REQUIRED,
    "additionalProperties": ProblemCode.UNEXPECTED_ARGUMENT,
    "unevaluatedProperties": ProblemCode.UNEXPECTED_ARGUMENT,
    "type": ProblemCode.WRONG_TYPE,
    "enum": ProblemCode.OUT_OF_SET,
    "const": ProblemCode.OUT_OF_SET,
}
_QUOTED = re.compile(r"'([^']*)'")


def compile_schema(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator for `schema`; raises SchemaError (with .json_path) when the schema itself is invalid."""
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_error_location(error: SchemaError) -> str:
    return f"{error.message} (at {error.json_path})"


def schema_problems(validator: Draft202012Validator, arguments: Mapping[str, object]) -> list[Problem]:
    """Every schema violation, as problems (one per missing or unexpected argument)."""
    from argwatch.server.checker import as_json_text  # the checker imports nothing of this module

    problems: list[Problem] = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        code = _CODES.get(str(error.validator), ProblemCode.OUT_OF_RANGE)
        path = [str(part) for part in error.absolute_path]
        if code is ProblemCode.MISSING_REQUIRED:
            for name in _missing(error):
                argument = "/".join([*path, name])
                problems.append(Problem(code, f"{argument}: required, missing", argument=argument))
            continue
        if code is ProblemCode.UNEXPECTED_ARGUMENT:
            instance = error.instance if isinstance(error.instance, dict) else {}
            for name in _unexpected(error):
                argument = "/".join([*path, name])
                problems.append(
                    Problem(
                        code,
                        f"{argument}: not an argument of this tool",
                        argument=argument,
                        value=as_json_text(instance.get(name)),
                    )
                )
            continue
        argument = "/".join(path)
        problems.append(
            Problem(
                code,
                f"{argument or 'arguments'}: {error.message}",
                argument=argument,
                value=as_json_text(error.instance),
            )
        )
    return problems


def _missing(error: ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    required = error.validator_value if isinstance(error.validator_value, list) else []
    return [name for name in required if isinstance(name, str) and name not in instance]


def _unexpected(error: ValidationError) -> list[str]:
    # jsonschema names them in its message: "... ('a', 'b' were unexpected)"; match against the instance.
    instance = error.instance if isinstance(error.instance, dict) else {}
    named = [name for name in _QUOTED.findall(error.message) if name in instance]
    return named or sorted(instance)
