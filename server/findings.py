"""The checker's vocabulary: problems, shapes, skipped checks and value checks, as frozen values."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ProblemCode(enum.Enum):
    """What kind of problem; the value is the `code` metric label."""

    NOT_IN_SET = "not_in_set"
    WRONG_TYPE = "wrong_type"
    MISSING_ARGUMENT = "missing_argument"
    MALFORMED_ARGUMENTS = "malformed_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    VALUE_SET_UNAVAILABLE = "value_set_unavailable"


class Shape(enum.Enum):
    """Why a string value missed its set."""

    NONE = ""
    CASE = "case"
    SEPARATOR = "separator"
    RETIRED = "retired"
    INVENTED = "invented"


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding on one argument (or on the whole call, when `argument` is empty)."""

    code: ProblemCode
    message: str
    argument: str = ""
    value_set: str = ""
    shape: Shape = Shape.NONE
    value: str = ""  # the given value as JSON text, truncated; "" when missing
    suggestion: str = ""  # the legal value a CASE or SEPARATOR slip normalises to
    in_set_normalised: bool = False


@dataclass(frozen=True, slots=True)
class SkippedCheck:
    """A check that failed open because its value set could not be read."""

    argument: str
    value_set: str


@dataclass(frozen=True, slots=True)
class ValueCheck:
    """One value compared with its set: what tool_argument_value_check_total counts."""

    argument: str
    value_set: str
    in_set: bool
    in_set_normalised: bool


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Everything the checker found in one call."""

    problems: tuple[Problem, ...]
    skipped: tuple[SkippedCheck, ...]
    value_checks: tuple[ValueCheck, ...]
    # The sets whose snapshots the checks used, by name.
    sets_used: tuple[str, ...]
