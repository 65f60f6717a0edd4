"""What a check answers (Outcome, with its problems as typed values) and what report_outcome takes (CallOutcome)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, cast, get_args

from argwatch.client._errors import InvalidInput
from argwatch.client._session import NO_SESSION, Session
from argwatch.v1 import gateway_pb2 as pb

# gateway.proto's ProblemCode and Shape, less their prefixes; tests/unit/test_client_outcome.py holds them to the proto.
ProblemCode = Literal[
    "UNSPECIFIED",
    "OUT_OF_SET",
    "WRONG_TYPE",
    "MISSING_REQUIRED",
    "MALFORMED_ARGUMENTS",
    "UNKNOWN_TOOL",
    "CHECK_UNAVAILABLE",
    "UNEXPECTED_ARGUMENT",
    "OUT_OF_RANGE",
    "NOT_FOUND",
    "NOT_OWNED",
    "RULE_FAILED",
    "REPEATED_CALL",
    "RULE_NOT_EVALUATED",
    "MISSING_SCOPE",
]
"""What kind of problem a Problem is: gateway.proto's ProblemCode, less its prefix."""
Shape = Literal["UNSPECIFIED", "CASE", "SEPARATOR", "RETIRED", "INVENTED", "OTHER_SCOPE"]
"""Why a value missed its set (for OUT_OF_SET): gateway.proto's Shape, less its prefix."""

CallOutcome = Literal["succeeded", "failed", "unknown"]
"""How a call of a tool with side effects went, as report_outcome takes it."""
_WIRE_OUTCOMES: dict[str, pb.Outcome] = {
    "succeeded": pb.OUTCOME_SUCCEEDED,
    "failed": pb.OUTCOME_FAILED,
    "unknown": pb.OUTCOME_UNKNOWN,
}


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem the gateway found with a call (gateway.proto's Problem, as plain values).

    Attributes:
        code: What kind of problem ("OUT_OF_SET", "NOT_OWNED", ...; "UNSPECIFIED" for a code newer than this client).
        argument: The argument's name; empty for call-level problems (UNKNOWN_TOOL, MALFORMED_ARGUMENTS).
        value_set: The value set the argument is bound to, if any.
        shape: For OUT_OF_SET, why the value missed ("CASE", "SEPARATOR", "RETIRED", "INVENTED"); else "UNSPECIFIED".
        message: A sentence for people and logs, naming the argument, value and set.
        value: The value the model gave, as JSON text, truncated to 200 characters; empty when it is missing.
        suggestion: For CASE and SEPARATOR, the legal value the input normalises to; for RETIRED, the value
            that replaced it, when the owner said so.
        in_set_normalised: Whether the argument's configured normalisation maps the value into the set.
        expected: What the argument takes, in words ("an integer", "at most 5000"), where the problem is about that.
    """

    code: ProblemCode
    argument: str
    value_set: str
    shape: Shape
    message: str
    value: str
    suggestion: str
    in_set_normalised: bool
    expected: str


def _problem(wire: pb.Problem) -> Problem:
    # A name of the enum, which the Literals list (a test holds them to the proto).
    code = pb.ProblemCode.Name(wire.code).removeprefix("PROBLEM_CODE_") if wire.code in _CODES else "UNSPECIFIED"
    shape = pb.Shape.Name(wire.shape).removeprefix("SHAPE_") if wire.shape in _SHAPES else "UNSPECIFIED"
    return Problem(
        code=cast(ProblemCode, code),
        argument=wire.argument,
        value_set=wire.value_set,
        shape=cast(Shape, shape),
        message=wire.message,
        value=wire.value,
        suggestion=wire.suggestion,
        in_set_normalised=wire.in_set_normalised,
        expected=wire.expected,
    )


# The enum numbers this client knows by name: a newer gateway's code reads as UNSPECIFIED, not as an error.
_CODES = frozenset(pb.ProblemCode.values())
_SHAPES = frozenset(pb.Shape.values())


class Outcome(NamedTuple):
    """What to do with one tool call, as Gateway.check answers it.

    Attributes:
        go_ahead: Run the tool.
        tool_error: When not, Repair's message: hand it back to the model as the tool's result.
        verdict: Everything the gateway said (problems, skipped checks, versions), as its protobuf message.
        session: Where the call was checked: report_outcome names it again.
    """

    go_ahead: bool
    tool_error: str
    verdict: pb.ValidateResponse
    session: Session = NO_SESSION

    @property
    def idempotency_key(self) -> str:
        """For a tool with side effects: pass this downstream unchanged, so the operation runs once."""
        return self.verdict.idempotency_key

    @property
    def call_id(self) -> str:
        """The id the gateway knows the call by."""
        return self.verdict.call_id

    @property
    def problems(self) -> tuple[Problem, ...]:
        """Every problem the gateway found, in its order (in observe mode, a call that goes ahead may have some)."""
        return tuple(_problem(problem) for problem in self.verdict.problems)


def outcome_value(outcome: str) -> pb.Outcome:
    """report_outcome's `outcome` on the wire; checked here too, for callers without a type checker."""
    if outcome not in _WIRE_OUTCOMES:
        raise InvalidInput(f"outcome must be one of {', '.join(get_args(CallOutcome))}, got {outcome!r}")
    return _WIRE_OUTCOMES[outcome]
