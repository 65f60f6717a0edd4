"""Judges a tool call: fetch the bound snapshots, run the checker, apply the mode, record telemetry.

This is the only place a verdict is made; the servicers only translate to and
from the wire. Label values given to metrics come from the policy: a tool the
policy does not know is recorded as `_unknown`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from time import perf_counter_ns, time_ns
from typing import Protocol

from argwatch.server.decisions.sink import DecisionSink, NoDecisionLog
from argwatch.server.decisions.value_plan import value_plans
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.arg_paths import label_for, names_in, top_of
from argwatch.server.policy.check_ids import REPEAT_CHECK, set_failure
from argwatch.server.policy.model import Disclosure, Failure, Mode, OnStale, Policy, ToolPolicy
from argwatch.server.records.checks import check_records, concealed_owner
from argwatch.server.records.clean_path import clean_path
from argwatch.server.records.lookup_client import RecordLookups
from argwatch.server.repair.message import RepairAdvice, build_advice
from argwatch.server.repair.rejections import RejectionLog, fingerprint
from argwatch.server.repair.tracker import NoRepairTracking, RepairTracking
from argwatch.server.sets.scoped import usable_scope
from argwatch.server.sets.snapshot import SetReading, ValueSetSnapshot
from argwatch.server.state.call_scope import CallRef, conversation_scope
from argwatch.server.state.operations import NoOperations, Operations, operation_key
from argwatch.server.telemetry.call_signatures import CallSignatures
from argwatch.server.telemetry.metrics import (
    CALL_LEVEL_ARGUMENT,
    UNKNOWN_LABEL,
    GatewayMetrics,
    ToolMeters,
    flag_label,
)
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator.quick_verdict import AnswerPlans, QuickVerdict, has_quick_path
from argwatch.server.validator.tool_meters import tool_meters
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.call_signature import NO_PROBLEMS, signature_of
from argwatch.server.verdict.check_names import CheckNames
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import CheckResult, Problem, ProblemCode, Shape, SkipReason
from argwatch.server.verdict.per_tool import PerTool
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord, Sighting
from argwatch.server.verdict.rule_checks import check_rules
from argwatch.server.verdict.schema_checks import schema_problems
from argwatch.server.verdict.set_checks import (
    NO_SESSION,
    all_in_sets,
    as_json_text,
    check_arguments,
    concealed_scope,
    members_plan,
    undisclosed,
)
from argwatch.server.verdict.tool_call import ToolCall

_EMPTY = CheckResult((), (), (), ())
# What the sampled log and the Admin API show for a value of an argument the policy redacts.
REDACTED = "REDACTED"


class ShadowTap(Protocol):
    """Where a decided call goes to be judged again by a shadow policy (server/shadow/runner.py)."""

    @property
    def active(self) -> bool:
        """Whether a shadow is loaded now: without one, validate is not wrapped at all."""
        ...

    def offer(self, call: ToolCall, verdict: Verdict, live: Policy) -> None:
        """Takes the call and its live verdict; never blocks, never raises, never changes the verdict."""
        ...


class Validator:
    """Makes verdicts and repair advice for one policy."""

    def __init__(
        self,
        policy: Policy,
        provider: ValueSetProvider,
        modes: ModeStore,
        metrics: GatewayMetrics,
        samples: SampledValueLog,
        rejections: RejectionLog,
        record_clients: Mapping[str, RecordLookups],
        offenders: OffenderTable,
        *,
        repairs: RepairTracking | None = None,
        operations: Operations | None = None,
        signatures: CallSignatures | None = None,
        decisions: DecisionSink | None = None,
        shadow: ShadowTap | None = None,
        counted: bool = True,
        answers: AnswerPlans | None = None,
        meters: Mapping[str, ToolMeters] | None = None,
    ) -> None:
        """`repairs`, `operations` and `signatures` are left out offline (replay): nothing is tracked, every
        call is an operation's first, no preview counts are kept. `decisions`: the decision log (None: none).
        `shadow`: where decided calls are judged again by a shadow policy, while it has one (None: never).
        `counted`: False for a judgment that records nothing (a shadow's): no metrics, offenders or samples.
        `answers`: where a tool whose quick verdict is membership alone is armed to be answered from a request's
        bytes (edge/native_answers.py; None: every call is read into a ToolCall). `meters`: each tool's metric
        children, already built (tool_meters.py: a reload builds them in turns of the loop; None: built here)."""
        self.policy = policy
        self._provider = provider
        self._modes = modes
        self._metrics = metrics
        self.metrics = metrics  # the servicers count what they refuse before a call reaches here
        self._samples = samples
        self._rejections = rejections
        self._record_clients = record_clients
        self._repairs: RepairTracking = repairs if repairs is not None else NoRepairTracking()
        self._offenders = offenders
        self._failures: Mapping[str, Failure] = {name: config.failure for name, config in policy.value_sets.items()}
        self._failure_basis: Mapping[str, Failure] | None = None
        self._failures_in_force: Mapping[str, Failure] = self._failures
        self._on_stale: Mapping[str, OnStale] = {name: config.on_stale for name, config in policy.value_sets.items()}
        self._undisclosed = frozenset(
            name for name, config in policy.value_sets.items() if config.disclose is Disclosure.NONE
        )
        # Each tool's distinct bound sets and its metric children, computed once rather than per call.
        self._sets_by_tool = PerTool(policy.tools, _distinct_sets)
        self._meters: Mapping[str, ToolMeters] = meters if meters is not None else tool_meters(policy, metrics)
        self._unknown_meters = metrics.for_tool(UNKNOWN_LABEL)
        metrics.keep_tool_meters([*self._meters.values(), self._unknown_meters])  # reused by the next reload
        self._plans = PerTool(policy.tools, members_plan)
        self._clean_paths = PerTool(policy.tools, clean_path)
        self._checks = PerTool(policy.tools, CheckNames)
        # Tools with a set scoped by a session field: their checks are handed the call's session.
        self._scoped_tools = frozenset(
            name for name, tool in policy.tools.items() if any(binding.scope for binding in tool.arguments)
        )
        # Per tool, what the caller is not told: that a value is another scope's member (by set, unless every
        # binding of it says reveal_other_scopes), or that a record is another customer's (by record, unless it
        # says reveal_not_owned). Counted as they are; shown as "invented" and "not found".
        self._concealed = PerTool(policy.tools, _concealed)
        self._redact = policy.sampling.redact
        self._by_model = policy.cohorts.declared  # each value check counted again under the call's model
        self._operations: Operations = operations if operations is not None else NoOperations()
        self._signatures = signatures
        self._decisions: DecisionSink = decisions if decisions is not None else NoDecisionLog()
        if self._decisions.enabled:
            self._value_plans, self._unknown_plan = value_plans(policy)  # how each tool's values are written
        self._shadow = shadow
        self._answers = answers if counted else None
        self.shadow_changed()
        if not counted:  # bound here, as validate is: the counted path costs not even a branch
            self._record = _not_recorded  # type: ignore[method-assign,assignment]
        # Each status tool, and the tools with side effects whose repeats a call of it lets through.
        status_for: dict[str, list[tuple[str, float]]] = {}
        for name, tool in policy.tools.items():
            if tool.side_effect is not None and tool.side_effect.status_tool:
                status_for.setdefault(tool.side_effect.status_tool, []).append((name, tool.side_effect.window_seconds))
        self._status_for = {name: tuple(targets) for name, targets in status_for.items()}
        # Each tool's judgment of a call that passes everything (quick_verdict.py); a judgment that records
        # nothing takes the general path, whose recording is the one switched off.
        self._quick: PerTool[QuickVerdict | None] = PerTool(policy.tools, self._quick_for if counted else _no_quick)

    def _quick_for(self, tool: ToolPolicy) -> QuickVerdict | None:
        plan = self._plans[tool.name]
        clean = self._clean_paths[tool.name] if tool.records or tool.rules else None
        if not has_quick_path(tool, plan, clean, tool.name in self._status_for):
            return None
        arm = None
        if (
            self._answers is not None
            and tool.schema_validator is None
            and clean is None
            and not self._by_model
            and not any(binding.scope for binding in tool.arguments)
        ):  # its quick verdict is membership alone: its calls can be answered from their bytes
            arm = partial(self._answers.arm, tool.name.encode(), plan.bindings, self._meters[tool.name])
        return QuickVerdict(
            tool,
            self._sets_by_tool[tool.name],
            plan,
            clean,
            self._provider.read,
            self._modes,
            self._meters[tool.name],
            self._signatures,
            self._count_by_model if self._by_model else None,
            self.policy.version,
            self._record_clients,
            arm,
        )

    def shadow_changed(self) -> None:
        """Binds `validate` to what this gateway does with a verdict now: a wrapper only for a decision log or
        a loaded shadow. Bound here rather than tested per call: without either, Validate costs not even a
        branch and an extra coroutine (docs/performance.md, Design choices, measured)."""
        shadowed = self._shadow is not None and self._shadow.active
        if self._decisions.enabled:
            self.validate = self._logged  # type: ignore[method-assign]
        elif shadowed:
            self.validate = self._shadowed  # type: ignore[method-assign]
        else:
            self.__dict__.pop("validate", None)  # the class's own: no wrapper at all
        if self._decisions.enabled or shadowed:
            self.quick_verdict = _not_now  # type: ignore[method-assign]  # each verdict goes through the wrapper
        else:
            self.__dict__.pop("quick_verdict", None)
        wrapped = self._decisions.enabled or shadowed
        if self._answers is not None:
            self._answers.pause(wrapped)
        # The response's bytes for a ValidateRequest's bytes when a tool armed from its quick verdict answers it
        # (edge/native_answers.py), counted as the quick verdict counts and its latency since `started` (its
        # perf_counter() reading) observed; None, having counted and observed nothing, otherwise (always, without
        # answers, or while a decision log or shadow wraps `validate`). An instance attribute the class does not
        # define: read as one, it is a specialised look-up where a method shadowed by it is not.
        self.answer: Callable[[bytes, float], bytes | None] = (
            self._answers.answer if self._answers is not None and not wrapped else _no_answer
        )

    def read_set(self, name: str) -> SetReading | None:
        """A value set as the checks would use it now (None: unavailable)."""
        return self._provider.read(name)

    async def _logged(self, call: ToolCall, deadline: float | None = None) -> Verdict:
        """`validate`, with the verdict offered to the decision log (what `validate` is when there is one)."""
        at_ns, started = time_ns(), perf_counter_ns()
        verdict = await Validator.validate(self, call, deadline)
        latency_ns = perf_counter_ns() - started
        # The mode document as it was when decided; the line is composed here and written by the writer's thread.
        plan = self._value_plans.get(call.tool, self._unknown_plan)
        self._decisions.offer(at_ns, call, verdict, self._modes.document, latency_ns, plan)
        if self._shadow is not None and self._shadow.active:
            self._shadow.offer(call, verdict, self.policy)
        return verdict

    async def _shadowed(self, call: ToolCall, deadline: float | None = None) -> Verdict:
        """`validate`, with the call then handed to the shadow (what `validate` is while one is loaded and
        there is no decision log). The verdict is made first and returned as it is: the shadow never decides."""
        verdict = await Validator.validate(self, call, deadline)
        assert self._shadow is not None
        self._shadow.offer(call, verdict, self.policy)
        return verdict

    def quick_verdict(self, call: ToolCall) -> Verdict | None:
        """`validate`'s verdict on `call`, made without awaiting, when its tool's quick verdict takes the call and
        nothing else is due (no open repair to close in its conversation, no decision log or shadow to hand it
        to); None, having counted nothing, otherwise: then `validate` judges it. The servicers try it first: a
        call it answers costs two coroutines fewer (docs/performance.md)."""
        if call.conversation_id and self._repairs.may_be_open:
            return None
        quick = self._quick[call.tool] if call.tool in self.policy.tools else None
        return quick.verdict(call) if quick is not None else None

    async def validate(self, call: ToolCall, deadline: float | None = None) -> Verdict:
        """The verdict on `call`; `deadline` is the seconds the caller has left (bounds record look-ups)."""
        tool = self.policy.tools.get(call.tool)
        if tool is not None:
            quick = self._quick[call.tool]
            passed = quick.verdict(call) if quick is not None else None
            if passed is not None:
                if call.conversation_id and self._repairs.may_be_open:
                    await self._repairs.passed(_scope_of(call), call.tool)
                return passed
        meters = self._meters[call.tool] if tool is not None else self._unknown_meters
        mode = self._modes.mode_for(call.tool)
        problems: list[Problem] = []
        if tool is None:
            problems.append(_unknown_tool(call.tool))
        if call.arguments is None:
            problems.append(_malformed(call.arguments_error))
        result = _EMPTY
        downgraded = False
        all_in_set = False  # every bound value in its set: the prepared path's counters apply
        if tool is not None and call.arguments is not None:
            read = self._provider.read
            readings = {}
            for name in self._sets_by_tool[tool.name]:  # a loop: a comprehension is a nested call
                readings[name] = read(name)
            session = (
                {"customer_id": call.customer_id, "tenant": call.tenant}
                if tool.name in self._scoped_tools
                else NO_SESSION
            )
            fast = all_in_sets(self._plans[tool.name], call.arguments, readings, session)
            all_in_set = fast is not None
            result = (
                fast
                if fast is not None
                else check_arguments(
                    tool,
                    call.arguments,
                    readings,
                    self._set_failures(),
                    self._undisclosed,
                    self.policy.limits.max_elements,
                    session,
                )
            )
            if tool.schema_validator is not None:
                problems.extend(_merged(schema_problems(tool.schema_validator, call.arguments), result.problems))
            else:
                problems.extend(result.problems)
            if tool.records or tool.rules:
                result = await self._against_records(tool, call, deadline, problems, result)
            for reading in result.readings_used:
                if reading.stale:
                    mode, downgraded = self._stale(meters.tool, reading.snapshot.name, mode, downgraded)
        # The conversation bound to its session: what every record of this call is kept under (call_scope.py).
        # A hash when the call has a session: named only where a record is read or written, not for every call.
        scope = ""
        # An on-call override of one check (check_ids.py) decides whether that check's problems refuse the
        # call; the tool's mode in force decides for the rest.
        refusing = self._refusing(tool, problems, mode) if problems else False
        sighting = None
        if (
            tool is not None
            and tool.side_effect is not None
            and call.arguments is not None
            and not refusing  # only a call that would run is an operation
        ):
            repeat_mode = self._modes.check_modes(call.tool).get(REPEAT_CHECK, mode)
            scope = _scope_of(call)
            sighting = await self._sight(tool, call, scope, repeat_mode, meters.tool)
            if sighting.is_repeat:
                problems.append(_repeated(sighting))
                refusing = repeat_mode is Mode.REJECT
        decision = Decision.REJECT if refusing else Decision.ALLOW
        self._record(meters, mode, decision, problems, result, call, all_in_set)
        if problems and (self._undisclosed or self._concealed.get(call.tool)):
            problems = self._hidden(call.tool, problems)  # counted as they are above; the caller is told no more
        if decision is Decision.ALLOW and call.tool in self._status_for:
            scope = scope or _scope_of(call)
            await self._operations.status_checked(scope, self._status_for[call.tool])
        give_up, attempt = False, 0
        if decision is Decision.REJECT:
            scope = scope or _scope_of(call)
            rejected = await self._rejections.record(
                call_id=call.call_id,
                tool=call.tool,
                scope=scope,
                problems=tuple(problems),
                call_fingerprint=fingerprint(call.tool, call.arguments, call.raw_arguments),
                repeat_of=sighting.earlier if sighting is not None and sighting.is_repeat else None,
                in_conversation=bool(call.conversation_id),
            )
            give_up, attempt = bool(rejected.give_up_reason), rejected.attempt
            # A refused repeat is not the model's argument to repair: stopping is often the right answer,
            # and must not count as a repair started, or later abandoned.
            if rejected.repeat_of is None:
                meters.repair_started.inc()
                if tool is not None and call.conversation_id:
                    await self._repairs.rejected(scope, call.tool, meters.tool, attempt)
        elif not problems and tool is not None and call.conversation_id and self._repairs.may_be_open:
            scope = scope or _scope_of(call)
            await self._repairs.passed(scope, call.tool)
        return Verdict(
            call.call_id,
            decision,
            mode,
            tuple(problems),
            result.skipped,
            result.readings_used,
            self.policy.version,
            downgraded,
            give_up,
            attempt,
            sighting,
        )

    def _shown_of(self, name: str, call: CallRef) -> ValueSetSnapshot | None:
        """What repair may list of a set to this caller: a scoped set's members of the caller's own scope only
        (its nearest matches too), none without a usable scope; None when the set cannot be read."""
        reading = self._provider.read(name)
        if reading is None or not reading.snapshot.scoped:
            return reading.snapshot if reading is not None else None
        config = self.policy.value_sets.get(name)
        scope = getattr(call, config.scope, "") if config is not None and config.scope else ""
        return reading.snapshot.within(scope) if usable_scope(scope) else None

    def _set_failures(self) -> Mapping[str, Failure]:
        """Each value set's failure in force: on-call's failure overrides (of the set, or of its source) over
        the policy's. Recomputed only when the overrides change (the store hands a new mapping each time)."""
        overrides = self._modes.failure_overrides()
        if overrides is not self._failure_basis:
            self._failure_basis = overrides
            self._failures_in_force = (
                {name: set_failure(config, overrides) for name, config in self.policy.value_sets.items()}
                if overrides
                else self._failures
            )
        return self._failures_in_force

    def _refusing(self, tool: ToolPolicy | None, problems: list[Problem], mode: Mode) -> bool:
        """Whether these problems refuse the call: in the tool's mode, each check's own where on-call set one."""
        if tool is None:
            return mode is Mode.REJECT
        checks = self._modes.check_modes(tool.name)
        if not checks:
            return mode is Mode.REJECT
        names = self._checks[tool.name]
        return any(checks.get(names.of(problem), mode) is Mode.REJECT for problem in problems)

    def _count_signature(self, tool: str, problems: list[Problem], result: CheckResult) -> None:
        """The call under its refusal signature; a tool the policy lacks under UNKNOWN_LABEL (one key, whatever
        name the caller sent), so that a preview of the global override counts what it does to those calls."""
        assert self._signatures is not None
        names = self._checks.get(tool)
        if not problems and not result.skipped:
            self._signatures.count(tool if names is not None else UNKNOWN_LABEL, NO_PROBLEMS)
            return
        on_stale = self._on_stale
        stale = any(
            reading.stale and on_stale.get(reading.snapshot.name) is OnStale.OBSERVE for reading in result.readings_used
        )
        signature = signature_of(names, problems, result.skipped, stale)
        self._signatures.count(tool if names is not None else UNKNOWN_LABEL, signature)

    def _redacted(self, path: str) -> bool:
        """Whether the policy redacts the argument at `path`: any name along it (payment.card redacts
        payment.card.number and card[2])."""
        return path in self._redact or any(name in self._redact for name in names_in(path))

    def _hidden(self, tool: str, problems: list[Problem]) -> list[Problem]:
        """The problems as the caller is told them: nothing shown of a `disclose: none` set, nor that a value or
        a record is another scope's (unless the policy opts out)."""
        concealed = self._concealed.get(tool) or {}
        shown = []
        for problem in problems:
            if problem.value_set in self._undisclosed:
                problem = undisclosed(problem)
            hide = concealed.get(problem.value_set)
            if hide is not None:
                problem = hide(problem)
            shown.append(problem)
        return shown

    def _count_by_model(self, tool: str, call: ToolCall, result: CheckResult, all_in_set: bool) -> None:
        """The call's value checks again, under the model and prompt version that wrote it, as the policy
        declares them (any other is "_other"): label values come from the policy, never from the caller."""
        model, version = self.policy.cohorts.labels(call.model, call.prompt_version)
        family = self._metrics.value_checks_by_model
        if all_in_set:
            for binding in self.policy.tools[tool].arguments:
                family.labels(tool, binding.name, model, version, "true", "true").inc()
            return
        for check in result.value_checks:
            in_set, normalised = flag_label(check.in_set), flag_label(check.in_set_normalised)
            family.labels(tool, check.argument, model, version, in_set, normalised).inc()

    async def _sight(self, tool: ToolPolicy, call: ToolCall, scope: str, mode: Mode, label: str) -> Sighting:
        """Mints the operation's key and records the call, in `scope`, in the shared memory of operations."""
        assert tool.side_effect is not None and call.arguments is not None
        key = operation_key(call.tool, scope, call.arguments, call.raw_arguments, tool.side_effect)
        sighting = await self._operations.sight(
            key, call.tool, scope, call.call_id, tool.side_effect, runs=mode is Mode.OBSERVE
        )
        if not sighting.shared:
            self._metrics.repeat_check_local_only(label)
        if sighting.is_repeat:
            self._metrics.repeat(label)
        elif sighting.earlier is not None:
            self._metrics.repeat_retry(label, sighting.retry.value)
        return sighting

    async def report_outcome(self, call: CallRef, outcome: OperationOutcome) -> OperationRecord | None:
        """Stores how a call of a tool with side effects turned out; None when the gateway does not know it
        in the conversation and session named."""
        record = await self._operations.report(call.scope, call.call_id, outcome)
        if record is not None:
            self._metrics.outcome_reported(record.tool, outcome.value)
        return record

    async def _against_records(
        self, tool: ToolPolicy, call: ToolCall, deadline: float | None, problems: list[Problem], result: CheckResult
    ) -> CheckResult:
        """Existence, ownership and rules; adds problems, and returns `result` with skipped record checks added."""
        assert call.arguments is not None
        session = {"customer_id": call.customer_id, "tenant": call.tenant}
        clean = self._clean_paths[tool.name]
        if clean is not None and clean.passes(call.arguments, session, self._record_clients):
            return result  # exactly what the checks below would find: nothing (clean_path.py)
        records = await check_records(
            tool,
            call.arguments,
            call.customer_id,
            self._record_clients,
            deadline,
            self.policy.limits.max_elements,
            self._modes.failure_overrides(),
        )
        # One fault, one problem: an id the schema already found missing or of the wrong type is not listed again.
        seen = {(problem.code, problem.argument) for problem in problems}
        problems.extend(problem for problem in records.problems if (problem.code, problem.argument) not in seen)
        rules = check_rules(tool, call.arguments, records.found, session, self.policy.limits.max_elements)
        if rules.problems:
            problems.extend(_not_yet_reported(rules.problems, problems, tool))
        else:
            problems.extend(rules.problems)
        for rule in rules.errors:
            self._metrics.rule_error(tool.name, rule)
        if not records.skipped and not rules.skipped:
            return result
        return result._replace(skipped=(*result.skipped, *records.skipped, *rules.skipped))

    def _stale(self, label: str, value_set: str, mode: Mode, downgraded: bool) -> tuple[Mode, bool]:
        """Counts a check against a stale set; with on_stale: observe, a rejecting call is judged in observe."""
        self._metrics.check_stale(label, value_set)
        if mode is Mode.REJECT and self._on_stale[value_set] is OnStale.OBSERVE:
            self._metrics.stale_downgrade(label, value_set)
            return Mode.OBSERVE, True
        return mode, downgraded

    async def repair(self, call: CallRef) -> RepairAdvice | None:
        """Advice for a rejected call, or None if the id is unknown in the conversation and session named,
        or forgotten."""
        rejected = await self._rejections.find(call.scope, call.call_id)
        if rejected is None:
            return None
        call_id = call.call_id
        if self._undisclosed or self._concealed.get(rejected.tool):
            # Kept before a reload hid more, or by a replica on another policy.
            rejected = replace(rejected, problems=tuple(self._hidden(rejected.tool, list(rejected.problems))))
        names = {p.value_set for p in rejected.problems if p.value_set}
        snapshots = {name: self._shown_of(name, call) for name in names}
        return build_advice(
            call_id=call_id,
            tool=rejected.tool,
            policy=self.policy,
            problems=rejected.problems,
            snapshots=snapshots,
            attempt=rejected.attempt,
            give_up_reason=rejected.give_up_reason,
            repeat_of=rejected.repeat_of,
            more_problems=rejected.more_problems,
        )

    def _record(
        self,
        meters: ToolMeters,
        mode: Mode,
        decision: Decision,
        problems: list[Problem],
        result: CheckResult,
        call: ToolCall,
        all_in_set: bool,
    ) -> None:
        meters.decided(mode, decision)
        if all_in_set:
            for counter in meters.all_in_set:  # every value in its set: counters resolved in advance
                counter.inc()
        else:
            for check in result.value_checks:
                meters.value_checks[check.argument, check.in_set, check.in_set_normalised].inc()
        if self._by_model:
            self._count_by_model(meters.tool, call, result, all_in_set)
        if not problems and not result.skipped:
            if self._signatures is not None:  # what a mode change's preview counts; the tool is known here
                self._signatures.count(call.tool, NO_PROBLEMS)
            return
        if self._signatures is not None:
            self._count_signature(call.tool, problems, result)
        if problems:  # what reject mode refuses, whatever the mode now: a mode change's blast radius
            invented = any(problem.shape is Shape.INVENTED for problem in problems)
            (meters.with_invented if invented else meters.with_problems).inc()
        metrics, label = self._metrics, meters.tool
        tool = self.policy.tools.get(call.tool)
        known = tool.known_arguments if tool is not None else frozenset()
        for skipped in result.skipped:
            if skipped.reason is SkipReason.ELEMENTS_LIMIT:
                metrics.elements_not_checked(label, _argument_label(skipped.argument, known), skipped.unchecked)
            else:
                metrics.failed_open(label, _argument_label(skipped.argument, known), skipped.value_set)
        for problem in problems:
            argument = _argument_label(problem.argument, known)
            metrics.problem(label, argument, problem.code.value)
            if problem.shape is not Shape.NONE:
                metrics.mismatch_shape(label, argument, problem.shape.value)
            if problem.code is ProblemCode.CHECK_UNAVAILABLE:
                # Not the model's fault: the value was never checked, so it is no offender.
                metrics.check_unavailable(label, problem.value_set)
            elif problem.value:
                if self._redact and self._redacted(problem.argument):  # never written where people read it
                    problem = replace(problem, value=REDACTED)
                # Under the label the status rows use: a call-level problem (an invented tool's name, say)
                # is the `_call` row's offender, not kept under "" where no detail looks.
                self._offenders.add(label, argument or CALL_LEVEL_ARGUMENT, problem.value, problem.shape.value)
                self._samples.offer(call.tool, problem, call.conversation_id, call.call_id, call.model)


def _scope_of(call: ToolCall) -> str:
    """The call's conversation bound to its session (call_scope.py)."""
    return conversation_scope(call.conversation_id, call.customer_id, call.tenant)


def _no_quick(tool: ToolPolicy) -> None:
    """No quick verdict: every call of `tool` judged the general way."""


def _not_recorded(*recorded: object) -> None:
    """`Validator._record` of a judgment that records nothing (a shadow policy's)."""


def _distinct_sets(tool: ToolPolicy) -> tuple[str, ...]:
    return tuple(dict.fromkeys(binding.value_set for binding in tool.arguments))


def _concealed(tool: ToolPolicy) -> dict[str, Callable[[Problem], Problem]]:
    """value_set (a set's name, or "record.<name>") -> how its problems are told to the caller of `tool`."""
    revealed: dict[str, bool] = {}
    for binding in tool.arguments:
        if binding.scope:
            revealed[binding.value_set] = revealed.get(binding.value_set, True) and binding.reveal_other_scopes
    hidden: dict[str, Callable[[Problem], Problem]] = {
        name: concealed_scope for name, shown in revealed.items() if not shown
    }
    for record in tool.records:
        if record.owner_attribute and not record.reveal_not_owned:
            hidden[f"record.{record.name}"] = partial(concealed_owner, record)
    return hidden


def _merged(schema_found: list[Problem], set_found: tuple[Problem, ...]) -> list[Problem]:
    """Schema problems, then value-set problems the schema did not already report (one fault, one problem).
    A schema problem standing for a set's (a bound argument missing, or of the wrong type) names the set, so
    repair still offers its values."""
    if not set_found:
        return schema_found
    by_place = {(problem.code, problem.argument): problem for problem in set_found}
    merged = [
        replace(problem, value_set=same.value_set)
        if not problem.value_set and (same := by_place.get((problem.code, problem.argument))) is not None
        else problem
        for problem in schema_found
    ]
    seen = {(problem.code, problem.argument) for problem in schema_found}
    return [*merged, *(problem for problem in set_found if (problem.code, problem.argument) not in seen)]


_UNSENDABLE = (ProblemCode.WRONG_TYPE, ProblemCode.MISSING_REQUIRED)


def _not_yet_reported(found: list[Problem], problems: list[Problem], tool: ToolPolicy) -> list[Problem]:
    """Rule problems less those that repeat a fault already listed: a rule not evaluated because a value it
    reads is missing or of the wrong type (already a problem there) is that one fault, not a second
    (still counted in argwatch_rule_errors_total)."""
    faulty = {top_of(problem.argument) for problem in problems if problem.code in _UNSENDABLE}
    if not faulty:
        return found
    rules = {f"rule.{rule.name}": rule for rule in tool.rules}
    kept = []
    for problem in found:
        rule = rules.get(problem.value_set)
        reads = (rule.arguments | {top_of(problem.argument)}) if rule is not None else set()
        if problem.code is ProblemCode.RULE_NOT_EVALUATED and reads & faulty:
            continue
        kept.append(problem)
    return kept


def _argument_label(argument: str, known: frozenset[str]) -> str:
    """The argument path as a metric label: the binding's pattern (`items[*].sku`) or top-level name the
    policy knows; `_unknown` for a name the model invented (labels never carry model-written text, nor an
    index); "" (call-level) stays as it is."""
    if not argument:
        return argument
    label = label_for(argument, known)
    return label if label is not None else UNKNOWN_LABEL


def _unknown_tool(name: str) -> Problem:
    shown = as_json_text(name)
    return Problem(
        code=ProblemCode.UNKNOWN_TOOL,
        message=f"the policy has no tool {shown}",
        value=shown,
    )


def _repeated(sighting: Sighting) -> Problem:
    earlier = sighting.earlier
    assert earlier is not None
    outcome = (
        "never reported" if earlier.outcome is OperationOutcome.UNREPORTED else f"reported {earlier.outcome.value}"
    )
    return Problem(
        code=ProblemCode.REPEATED_CALL,
        message=f"repeats call {earlier.call_id} of the same operation (its outcome {outcome}): it may have happened",
    )


def _malformed(reason: str) -> Problem:
    return Problem(code=ProblemCode.MALFORMED_ARGUMENTS, message=f"arguments: {reason}")


def _no_answer(body: bytes, started: float) -> None:
    """Validator.answer without native answers: no call is answered from its bytes."""
    return None


def _not_now(call: ToolCall) -> Verdict | None:
    """`quick_verdict` while `validate` is wrapped (a decision log, a shadow): never, so that every verdict goes
    through the wrapper."""
    return None
