"""The verdict core's vocabulary: problems, shapes, skipped checks and value checks, as immutable values.

The values built on every call (ValueCheck, SkippedCheck, CheckResult) are
NamedTuples: as immutable as a frozen dataclass, built in C at a third of the
cost of a frozen dataclass, which sets each field through object.__setattr__
(docs/performance.md, "Design choices, measured").
Problem, built only when something is wrong, stays a frozen dataclass.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from argwatch.server.sets.snapshot import SetReading


class ProblemCode(enum.Enum):
    """What kind of problem; the value is the `code` metric label."""

    OUT_OF_SET = "out_of_set"
    WRONG_TYPE = "wrong_type"
    MISSING_REQUIRED = "missing_required"
    MALFORMED_ARGUMENTS = "malformed_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    CHECK_UNAVAILABLE = "check_unavailable"
    UNEXPECTED_ARGUMENT = "unexpected_argument"
    OUT_OF_RANGE = "out_of_range"
    NOT_FOUND = "not_found"
    NOT_OWNED = "not_owned"
    RULE_FAILED = "rule_failed"
    RULE_NOT_EVALUATED = "rule_not_evaluated"
    REPEATED_CALL = "repeated_call"
    # A value bound to a set scoped by a session field, in a call whose session names no scope: not judged
    # (never against every scope), never a pass; the agent's integration, not the model, must fix it.
    MISSING_SCOPE = "missing_scope"


class Shape(enum.Enum):
    """Why a string value missed its set."""

    NONE = ""
    CASE = "case"
    SEPARATOR = "separator"
    RETIRED = "retired"
    INVENTED = "invented"
    # A member of another scope of a scoped set (another customer's): counted apart, and shown to the caller
    # as INVENTED unless the policy says reveal_other_scopes.
    OTHER_SCOPE = "other_scope"


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
    expected: str = ""  # what the argument takes, in words ("an integer", "at most 5000"); "" if nothing more
    # An enum miss: where that enum is in the tool's schema (a JSON pointer), so Repair can list its members
    # as it lists a set's; "" otherwise.
    enum_pointer: str = ""


class SkipReason(enum.Enum):
    """Why a check did not run."""

    UNAVAILABLE = "unavailable"  # its set or record could not be read, or its rule evaluated (on_error: open)
    ELEMENTS_LIMIT = "elements_limit"  # elements past the policy's limits.max_elements


class SkippedCheck(NamedTuple):
    """A check that did not run, listed and counted, never a pass: it failed open (its value set or record
    could not be read, or, where the policy says `on_error: open`, its rule could not be evaluated on this
    call's values), or its array had more elements than the policy checks (`unchecked` of them not checked)."""

    argument: str
    value_set: str
    reason: SkipReason = SkipReason.UNAVAILABLE
    unchecked: int = 0


class ValueCheck(NamedTuple):
    """One value compared with its set: what tool_argument_value_check_total counts."""

    argument: str
    value_set: str
    in_set: bool
    in_set_normalised: bool


class CheckResult(NamedTuple):
    """Everything the checker found in one call."""

    problems: tuple[Problem, ...]
    skipped: tuple[SkippedCheck, ...]
    value_checks: tuple[ValueCheck, ...]
    # The set readings the checks used, each once.
    readings_used: tuple[SetReading, ...]
