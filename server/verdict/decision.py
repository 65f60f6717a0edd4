"""The gateway's answer to one call, as a frozen value the servicers translate to the wire."""

from __future__ import annotations

import enum
from typing import NamedTuple

from argwatch.server.policy.model import Mode
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.findings import Problem, SkippedCheck
from argwatch.server.verdict.repeats import Sighting


class Decision(enum.Enum):
    """Run the call or not; the value is the `decision` metric label."""

    ALLOW = "allow"
    REJECT = "reject"


class Verdict(NamedTuple):
    """The decision on one call, with everything that led to it (a NamedTuple: one per call, see findings.py)."""

    call_id: str
    decision: Decision
    mode: Mode
    problems: tuple[Problem, ...]
    skipped: tuple[SkippedCheck, ...]
    readings_used: tuple[SetReading, ...]
    policy_version: str
    # Reject mode judged as observe because a set it needed was stale (on_stale: observe).
    downgraded_by_staleness: bool = False
    give_up: bool = False  # a rejected call that should not be retried
    repair_attempt: int = 0  # which rejected attempt in the conversation (0: allowed)
    # A tool with side effects: its operation's key and any earlier call of it (None: no check ran).
    sighting: Sighting | None = None


_new_tuple = tuple.__new__
_ALLOW = Decision.ALLOW


def allowed(call_id: str, mode: Mode, readings_used: tuple[SetReading, ...], policy_version: str) -> Verdict:
    """`Verdict(call_id, Decision.ALLOW, mode, (), (), readings_used, policy_version)`, built as Verdict._make
    builds one: a NamedTuple's own constructor is a Python function, a tenth of a quick verdict."""
    return _new_tuple(Verdict, (call_id, _ALLOW, mode, (), (), readings_used, policy_version, False, False, 0, None))
