"""The quick verdict's answers made in C from a request's bytes, each tool armed with a plan of what it read.

A call the quick verdict passes costs about 40,000 instructions in Python from
request bytes to answer bytes, a third of a bare echo stream's message
(docs/performance.md). Once a tool's quick verdict has passed a call, this arms
the tool with a plan: the guards under which that verdict would be the same for
the next call (each set's kept reading, the modes in force, no repair open), its
sets' members, the tallies it counted and its answer without the call id.
_answers.c then answers the tool's next calls from their bytes while the guards
hold, and declines (None) any call it cannot answer exactly as the Python path
would; that call is judged by the Python path, which arms the tool again.

Only a tool whose quick verdict is membership and nothing else is armed: no
schema, no records or rules, no scoped binding, no per-model count (the
validator decides, validator.py). tests/unit/test_native_answers.py holds the two
paths to the same bytes and the same counts, call by call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import NamedTuple, Protocol

from argwatch.server.edge._answers import MAX_BOUND, Answers
from argwatch.server.edge.request_limits import FIELD_LIMITS
from argwatch.server.edge.wire import answer_prefix
from argwatch.server.modes.store import ModeStore
from argwatch.server.repair.tracker import RepairTracking
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.telemetry._buckets import Buckets
from argwatch.server.telemetry.call_signatures import CallSignatures, SignatureKey
from argwatch.server.telemetry.metrics import ToolMeters
from argwatch.server.telemetry.tallies import Tally
from argwatch.server.valuesets.set_table import KeptGuard
from argwatch.server.verdict.call_signature import NO_PROBLEMS
from argwatch.server.verdict.decision import Verdict


class NativePlan(NamedTuple):
    """What _answers.c answers a tool's calls by (its fields by position: the enum there)."""

    until: float  # the clock's reading before which every set's reading is fresh
    clock: Callable[[], float] | None  # the set table's monotonic clock; None when the tool binds no set
    same: tuple[tuple[object, str, object], ...]  # each attribute still `is` the object
    equal: tuple[tuple[object, str, object], ...]  # each attribute still == the value
    open_repairs: Mapping[tuple[str, str], object] | None  # empty: a call with a conversation closes nothing
    bindings: tuple[tuple[str, object], ...]  # (argument, its set's members)
    tallies: tuple[object, ...]  # each one's value += 1
    signatures: Mapping[SignatureKey, int] | None  # the live signature counts, where kept
    signature: object  # the key counted in them
    signature_hash: int  # hash(signature), so that _answers.c does not hash the key (a tuple) twice a call
    prefix: bytes  # the answer without its call id


ArmCall = Callable[[bytes, tuple[tuple[str, str, str], ...], ToolMeters, Verdict], None]


class KeptGuards(Protocol):
    """What the value-set provider tells of a reading it hands out again unread (set_table.SetTable)."""

    def kept_guard(self, name: str, reading: SetReading) -> KeptGuard | None: ...


class NativeAnswers:
    """One validator's answers in C: `answer` is _answers.c's; `arm` is called by a tool's quick verdict."""

    def __init__(
        self,
        provider: KeptGuards,
        modes: ModeStore,
        repairs: RepairTracking,
        signatures: CallSignatures | None,
        latency: Buckets,
    ) -> None:
        """`latency`: the buckets of the histogram the servicers observe each call's latency in
        (metrics.validate_seconds): a call answered here is observed there, by _answers.c."""
        self._answers = Answers(FIELD_LIMITS, Tally, latency)
        self.answer: Callable[[bytes, float], bytes | None] = self._answers.answer
        # Called with each verdict a tool's quick verdict passes: a dict look-up in C while the tool is armed
        # (answer drops a plan gone stale), the plan made by _arm only when it is not. (`build` typed first:
        # the partial over a C method is checked against nothing.)
        build: ArmCall = self._arm
        self._arm_offer: ArmCall = partial(self._answers.offer, build)
        self._kept_guard = provider.kept_guard
        self._modes = modes
        self._repairs = repairs
        self._signatures = signatures
        self.paused = False  # a decision log or shadow wraps validate: nothing armed, nothing answered

    @property
    def arm(self) -> ArmCall:
        """What a tool's quick verdict calls with each verdict it passes (partial'd with the tool's key,
        bindings and meters by the validator)."""
        return self._arm_offer

    def _arm(
        self,
        key: bytes,
        bindings: tuple[tuple[str, str, str], ...],
        meters: ToolMeters,
        verdict: Verdict,
    ) -> None:
        """Arms the tool named by `key` (its name's UTF-8), which has no plan, with what its quick verdict read
        to make `verdict`, from `bindings` (set_checks.MembersPlan's, none scoped); nothing when something
        read is not a kept reading (a later call arms it)."""
        if self.paused or len(bindings) > MAX_BOUND:
            return
        tool = key.decode()
        mode_guard = self._modes.mode_guard(tool)
        if mode_guard is None:
            return
        same, equal = [mode_guard], []
        until, clock = float("inf"), None
        by_set = {}
        for reading in verdict.readings_used:
            snapshot = reading.snapshot
            kept = self._kept_guard(snapshot.name, reading)
            if kept is None or snapshot.scoped:
                return
            until, clock = min(until, kept.until), kept.clock
            same.append(kept.same)
            equal.append(kept.equal)
            by_set[snapshot.name] = snapshot.members
        members = []
        for argument, value_set, scope in bindings:
            if scope or value_set not in by_set:
                return
            members.append((argument, by_set[value_set]))
        counts, signature = (
            self._signatures.kept_count(tool, NO_PROBLEMS) if self._signatures is not None else (None, None)
        )
        plan = NativePlan(
            until,
            clock,
            tuple(same),
            tuple(equal),
            self._repairs.open_guard(),
            tuple(members),
            meters.passed_tallies(verdict.mode),
            counts,
            signature,
            hash(signature),
            answer_prefix(verdict),
        )
        self._answers.arm(key, plan)

    def pause(self, paused: bool) -> None:
        """While paused (a decision log or shadow wraps validate), no tool is armed and every plan is dropped."""
        self.paused = paused
        if paused:
            self._answers.forget()
