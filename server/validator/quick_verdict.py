"""A call that passes every check, judged without the general path's per-call objects: its verdict, or None.

Most calls pass. Validator.validate builds a problem list, a check result and a
session mapping for every call so that a failure can be described, counted and
repaired; a call that fails nothing needs none of them. A QuickVerdict answers
only where the general path would find no problem, skip no check and downgrade
nothing: every set the tool binds fresh, every bound value a string at the top
level and in its set (the caller's own scope's, for a scoped set), the schema
valid, the records and rules clean (records/clean_path.py), and the tool with no
side effect or status to keep. Its answer is then the general path's verdict,
counted the same way; any other call gets None, and the general path judges it
and says what is wrong. tests/unit/test_quick_verdict.py holds the two paths to
the same verdicts and the same counts, call by call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.records.clean_path import CleanPath
from argwatch.server.records.lookup_client import RecordLookups
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.telemetry.call_signatures import CallSignatures
from argwatch.server.telemetry.metrics import ToolMeters
from argwatch.server.verdict.call_signature import NO_PROBLEMS
from argwatch.server.verdict.decision import Verdict, allowed
from argwatch.server.verdict.findings import CheckResult
from argwatch.server.verdict.schema_checks import schema_problems
from argwatch.server.verdict.set_checks import NO_SESSION, MembersPlan, values_in_sets
from argwatch.server.verdict.tool_call import ToolCall

_NOTHING_FOUND = CheckResult((), (), (), ())


class AnswerPlans(Protocol):
    """Where a tool whose quick verdict is membership alone is armed to answer from a request's bytes
    (edge/native_answers.py): `answer` answers, `arm` is told each verdict the quick verdict passes."""

    answer: Callable[[bytes, float], bytes | None]

    @property
    def arm(self) -> Callable[[bytes, tuple[tuple[str, str, str], ...], ToolMeters, Verdict], None]: ...

    def pause(self, paused: bool) -> None: ...


class QuickVerdict:
    """One tool's verdict on a call that passes everything; None for any other call."""

    __slots__ = (
        "_arm",
        "_by_model",
        "_clean",
        "_clients",
        "_meters",
        "_modes",
        "_needs_session",
        "_plan",
        "_read",
        "_schema",
        "_sets",
        "_signatures",
        "_tool",
        "_version",
    )

    def __init__(
        self,
        tool: ToolPolicy,
        sets: tuple[str, ...],
        plan: MembersPlan,
        clean: CleanPath | None,
        read: Callable[[str], SetReading | None],
        modes: ModeStore,
        meters: ToolMeters,
        signatures: CallSignatures | None,
        by_model: Callable[[str, ToolCall, CheckResult, bool], None] | None,
        version: str,
        clients: Mapping[str, RecordLookups],
        arm: Callable[[Verdict], None] | None = None,
    ) -> None:
        """`sets`: the tool's distinct bound sets, in order of first binding; `clean`: the tool's clean path
        where it has records or rules; `by_model`: how a call is counted
        again under its model (None: the policy declares no models); `arm`: told each verdict passed, where
        the tool's calls can be answered from their bytes (AnswerPlans.arm); the rest as the validator has
        them."""
        self._tool = tool.name
        self._sets = sets
        self._plan = plan
        self._schema = tool.schema_validator
        self._clean = clean
        self._clients = clients
        # The session, as the general path hands it to scoped sets and to records and rules.
        self._needs_session = clean is not None or any(binding.scope for binding in tool.arguments)
        self._read = read
        self._modes = modes
        self._meters = meters
        self._signatures = signatures
        self._by_model = by_model
        self._version = version
        self._arm = arm

    def verdict(self, call: ToolCall) -> Verdict | None:
        """The general path's verdict on `call` if it passes every check; None: judge it the general way."""
        arguments = call.arguments
        if arguments is None:
            return None
        read = self._read
        readings: dict[str, SetReading] = {}
        for name in self._sets:
            reading = read(name)
            if reading is None or reading.stale:  # unavailable: a skip or a problem; stale: counted as such
                return None
            readings[name] = reading
        session = {"customer_id": call.customer_id, "tenant": call.tenant} if self._needs_session else NO_SESSION
        if not values_in_sets(self._plan, arguments, readings, session):
            return None
        if self._schema is not None and schema_problems(self._schema, arguments):
            return None
        if self._clean is not None and not self._clean.passes(arguments, session, self._clients):
            return None
        mode = self._modes.mode_for(self._tool)
        # Counted as Validator._record counts an allowed call with every bound value in its set.
        self._meters.all_passed(mode)
        if self._by_model is not None:
            self._by_model(self._tool, call, _NOTHING_FOUND, True)
        if self._signatures is not None:
            self._signatures.count(self._tool, NO_PROBLEMS)
        verdict = allowed(call.call_id, mode, tuple(readings.values()), self._version)
        if self._arm is not None:
            self._arm(verdict)
        return verdict


def has_quick_path(tool: ToolPolicy, plan: MembersPlan, clean: CleanPath | None, status_tool: bool) -> bool:
    """Whether some call of `tool` can be judged quickly: not where every call needs the general path, for a
    binding inside arrays or objects, records or rules with no clean path (`clean` None), a side effect (its
    operation is recorded) or a status tool (its call is recorded)."""
    if not plan.top_level or tool.side_effect is not None or status_tool:
        return False
    return clean is not None or not (tool.records or tool.rules)
