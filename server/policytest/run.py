"""Each test case judged by the gateway's own Validator, offline, and its verdict compared with the one expected.

As in a replay (server/replay/run.py), nothing of the verdict is re-implemented:
the case's sets reach the Validator through a ValueSetProvider, and its records
through the same record checks a gateway runs, from an in-process source
(case_sources.py) instead of a RecordSource over the network.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from argwatch.common.files import SETS_FILE_BYTES, read_file
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.model import Policy
from argwatch.server.policy.strict_yaml import load_yaml
from argwatch.server.policytest.case_sources import CaseRecords, CaseSets
from argwatch.server.policytest.cases import Case, ExpectedProblem, TestFileError
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.sets.payload import SetPayload, SourceUnavailable
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator import Validator
from argwatch.server.valuesets.file_source import parse_sets
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall, decode_json_arguments

# In-process sources answer at once; this bounds start-up only if something were to hang.
SETS_WAIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class GotProblem:
    code: str
    path: str
    shape: str
    message: str


@dataclass
class CaseResult:
    case: Case
    decision: str = ""
    problems: list[GotProblem] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    missing: list[ExpectedProblem] = field(default_factory=list)  # expected, not got
    unexpected: list[GotProblem] = field(default_factory=list)  # got, not expected

    @property
    def decision_differs(self) -> bool:
        return self.decision != self.case.decision

    @property
    def skipped_differs(self) -> bool:
        return self.case.skipped is not None and sorted(self.case.skipped) != sorted(self.skipped)

    @property
    def passed(self) -> bool:
        return not (self.decision_differs or self.missing or self.unexpected or self.skipped_differs)


@dataclass(frozen=True, slots=True)
class PreparedCase:
    """A case with what its checks see resolved against the policy: set payloads, and records by kind."""

    case: Case
    sets: dict[str, SetPayload]
    records: dict[str, dict[str, dict[str, object]]]


def prepare(policy: Policy, cases: Iterable[Case]) -> list[PreparedCase]:
    """Resolves every case's tool, sets and records against the policy; TestFileError names each unknown one,
    so a case that names something the policy lacks is an error, never a pass."""
    errors: list[str] = []
    exports: dict[str, dict[str, SetPayload]] = {}
    kinds = {binding.kind for tool in policy.tools.values() for binding in tool.records}
    prepared = []
    for case in cases:
        before = len(errors)
        tool = policy.tools.get(case.tool)
        if tool is None:
            errors.append(
                f"{case.where}: {case.name}: unknown tool {case.tool!r} (the policy's: {_listed(policy.tools)})"
            )
        sets: dict[str, SetPayload] = {}
        for path in case.given.sets_from:
            if path not in exports:
                try:
                    exports[path] = parse_sets(load_yaml(read_file(path, SETS_FILE_BYTES)), path, 0)
                except (OSError, SourceUnavailable, ValueError) as error:
                    errors.append(f"{case.where}: {case.name}: sets_from {path}: {error}")
                    exports[path] = {}
            sets.update(exports[path])
        for name in case.given.sets:
            if name not in policy.value_sets:
                errors.append(
                    f"{case.where}: {case.name}: unknown value set {name!r} "
                    f"(the policy's: {_listed(policy.value_sets)})"
                )
        try:
            sets.update(parse_sets(case.given.sets, f"{case.where}: sets", 0))
        except SourceUnavailable as error:
            errors.append(str(error))
        # A binding's name (`order`) means its kind: the case's tool's binding first, then any tool's.
        names = {binding.name: binding.kind for other in policy.tools.values() for binding in other.records}
        if tool is not None:
            names.update({binding.name: binding.kind for binding in tool.records})
        records: dict[str, dict[str, dict[str, object]]] = {}
        for key, by_id in case.given.records.items():
            kind = key if key in kinds else names.get(key)
            if kind is None:
                known = ", ".join(sorted(kinds | set(names))) or "none"
                errors.append(
                    f"{case.where}: {case.name}: unknown record {key!r} (the policy's kinds and bindings: {known})"
                )
                continue
            records.setdefault(kind, {}).update(by_id)
        if len(errors) == before:
            prepared.append(PreparedCase(case, sets, records))
    if errors:
        raise TestFileError(errors)
    return prepared


async def run_case(policy: Policy, prepared: PreparedCase) -> CaseResult:
    """The case's verdict from a Validator of its own (its own sets and records), compared with the expected."""
    case = prepared.case
    verdict = await _verdict(policy, prepared)
    result = CaseResult(
        case,
        verdict.decision.value,
        [GotProblem(p.code.value, p.argument, p.shape.value, p.message) for p in verdict.problems],
        [(skipped.argument, skipped.value_set) for skipped in verdict.skipped],
    )
    unmatched = list(result.problems)
    for expected in case.problems:
        match = next((got for got in unmatched if _matches(expected, got)), None)
        if match is None:
            result.missing.append(expected)
        else:
            unmatched.remove(match)
    result.unexpected = unmatched
    return result


async def _verdict(policy: Policy, prepared: PreparedCase) -> Verdict:
    metrics = GatewayMetrics(CollectorRegistry())
    cache = SharedCache(None, metrics)
    sets = CaseSets(prepared.sets)
    provider = ValueSetProvider(policy, {source: sets for source in policy.sources}, cache, metrics)
    records = CaseRecords(prepared.records)
    sources = {binding.source for tool in policy.tools.values() for binding in tool.records}
    validator = Validator(
        policy,
        provider,
        ModeStore(policy),
        metrics,
        SampledValueLog(0.0, 1),
        RejectionLog(cache, policy.repair),
        dict.fromkeys(sources, records),
        OffenderTable(),
    )
    case = prepared.case
    try:
        await provider.start(SETS_WAIT_SECONDS)
        arguments, error = decode_json_arguments(case.arguments_json)
        call = ToolCall(
            case.tool,
            arguments,
            "policy-test",
            case.conversation,
            case.customer_id,
            case.tenant,
            error,
            case.arguments_json,
            case.model,
            case.prompt_version,
        )
        return await validator.validate(call)
    finally:
        await provider.close()


def _matches(expected: ExpectedProblem, got: GotProblem) -> bool:
    return (
        expected.code == got.code
        and expected.path == got.path
        and (expected.shape is None or expected.shape == got.shape)
    )


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
