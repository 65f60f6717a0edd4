"""A call's refusal signature: which of its tool's checks found what, or could not run; what a preview counts.

Reject mode refuses a call when any of its problems comes from a check in
reject; a failure override turns a check that could not run from a problem
(failing closed) into a skipped check (failing open), or back. So the
signature (check, cause, failed open) of each problem and each skipped check
is all a mode change's preview needs to say how the change would have decided
the call (modes/preview.py), without keeping the call.
"""

from __future__ import annotations

from collections.abc import Iterable

from argwatch.server.verdict.check_names import CheckNames
from argwatch.server.verdict.findings import Problem, ProblemCode, SkippedCheck, SkipReason

Element = tuple[str, str, bool]  # (check, cause, whether the check failed open and was skipped)
Signature = frozenset[Element]
NO_PROBLEMS: Signature = frozenset()

UNVERIFIABLE = "unverifiable"  # a check that could not run: its source or record look-up was down
REPEAT = "repeat"
# Not a problem: the call read a stale set whose policy says `on_stale: observe`, so the gateway judged it in
# observe whatever the tool's mode (a check's own override still decides that check's problems).
JUDGED_STALE: Element = ("", "on_stale_observe", False)


def cause_of(problem: Problem) -> str:
    """The cause a preview counts a problem under: its code, an out-of-set value's shape ("invented",
    "other_scope", "case", ...), "unverifiable" for a check that could not run, "repeat" for a repeat."""
    code = problem.code
    if code is ProblemCode.CHECK_UNAVAILABLE:
        return UNVERIFIABLE
    if code is ProblemCode.OUT_OF_SET:
        return str(problem.shape.value or code.value)
    if code is ProblemCode.REPEATED_CALL:
        return REPEAT
    return str(code.value)


def signature_of(
    names: CheckNames | None, problems: Iterable[Problem], skipped: Iterable[SkippedCheck], stale: bool = False
) -> Signature:
    """The call's signature; NO_PROBLEMS for a call with no problem and no check skipped for a failure.
    `names` None: a tool the policy lacks (its problems are the whole call's); `stale`: judged in observe
    for a stale set (JUDGED_STALE)."""
    if names is None:
        elements = {("", cause_of(problem), False) for problem in problems}
    else:
        elements = {(names.of(problem), cause_of(problem), False) for problem in problems}
    for check in skipped:
        if check.reason is SkipReason.UNAVAILABLE:  # not ELEMENTS_LIMIT: no failure override changes that
            elements.add((names.of_skipped(check) if names is not None else "", UNVERIFIABLE, True))
    if elements and stale:
        elements.add(JUDGED_STALE)
    return frozenset(elements) if elements else NO_PROBLEMS
