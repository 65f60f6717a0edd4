"""How a shadow's verdict differs from the live one, and an example of it as kept for on-call (pure, bounded).

The repeat check (a tool with side effects) is live-only: it reads and
writes the shared memory of operations, which a shadow must not touch. So the
live verdict is compared as it was before the repeat check: its REPEATED_CALL
problem left out, and a call refused only as a repeat counted as allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import NamedTuple

from argwatch.server.policy.arg_paths import names_in
from argwatch.server.validator import REDACTED
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode

# Where people read an example: every string the model wrote is cut to this.
MAX_EXAMPLE_CHARS = 120
# Problems listed per side of an example; the rest are counted.
MAX_EXAMPLE_PROBLEMS = 10


class Kind(enum.Enum):
    """How a shadow's verdict differs from the live one; the value is the metric label."""

    WOULD_REFUSE = "would_refuse"  # the live policy allows, the shadow refuses
    WOULD_ALLOW = "would_allow"  # the live policy refuses, the shadow allows
    DIFFERENT_PROBLEMS = "different_problems"  # the same decision, another set of (code, path)


KINDS = tuple(Kind)


class ShownProblem(NamedTuple):
    """One problem of an example: its code, its argument's path and value (cut, or REDACTED). NamedTuples, not
    frozen dataclasses: one is built per differing call, and they cost a third as much to build."""

    code: str
    path: str
    value: str


class Example(NamedTuple):
    """One call the shadow judged differently, as on-call reads it."""

    at: float
    call_id: str
    tool: str
    live_decision: str
    shadow_decision: str
    live_problems: tuple[ShownProblem, ...]
    shadow_problems: tuple[ShownProblem, ...]
    problems_left_off: int  # past MAX_EXAMPLE_PROBLEMS, on either side


def live_before_repeats(verdict: Verdict) -> tuple[Decision, tuple[Problem, ...]]:
    """The live decision and problems as they were before the repeat check (see the module docstring)."""
    problems = verdict.problems
    sighting = verdict.sighting
    if sighting is None or not sighting.is_repeat:
        return verdict.decision, problems
    # The repeat check runs only on a call nothing else refused, so a repeat's call was allowed before it.
    return Decision.ALLOW, tuple(problem for problem in problems if problem.code is not ProblemCode.REPEATED_CALL)


def difference(live: Decision, live_problems: Iterable[Problem], shadow: Verdict) -> Kind | None:
    """How the shadow's verdict differs from the live one (None: it does not)."""
    if live is not shadow.decision:
        return Kind.WOULD_REFUSE if shadow.decision is Decision.REJECT else Kind.WOULD_ALLOW
    if _places(live_problems) != _places(shadow.problems):
        return Kind.DIFFERENT_PROBLEMS
    return None


def example(
    at: float,
    call_id: str,
    tool: str,
    live: tuple[Decision, tuple[Problem, ...]],
    shadow: Verdict,
    redact: frozenset[str],
) -> Example:
    """The example kept of one differing call: model-written text cut, redacted arguments' values hidden."""
    live_shown, live_more = _shown(live[1], redact)
    shadow_shown, shadow_more = _shown(shadow.problems, redact)
    return Example(
        at=at,
        call_id=_cut(call_id),
        tool=_cut(tool),
        live_decision=live[0].value,
        shadow_decision=shadow.decision.value,
        live_problems=live_shown,
        shadow_problems=shadow_shown,
        problems_left_off=live_more + shadow_more,
    )


def _places(problems: Iterable[Problem]) -> frozenset[tuple[ProblemCode, str]]:
    return frozenset((problem.code, problem.argument) for problem in problems)


def _shown(problems: tuple[Problem, ...], redact: frozenset[str]) -> tuple[tuple[ShownProblem, ...], int]:
    shown = tuple(
        ShownProblem(
            problem.code.value,
            _cut(problem.argument),
            REDACTED if problem.value and _redacted(problem.argument, redact) else _cut(problem.value),
        )
        for problem in problems[:MAX_EXAMPLE_PROBLEMS]
    )
    return shown, max(0, len(problems) - MAX_EXAMPLE_PROBLEMS)


def _redacted(path: str, redact: frozenset[str]) -> bool:
    """As the Validator decides it: any name along the path (payment.card redacts payment.card.number)."""
    return bool(redact) and (path in redact or any(name in redact for name in names_in(path)))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_EXAMPLE_CHARS else text[: MAX_EXAMPLE_CHARS - 1] + "…"
