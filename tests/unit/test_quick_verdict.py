"""A quick verdict is the general path's verdict, counted the same way, on every call it answers; it answers
the clean calls of every tool that can have one, and no call of a tool that cannot."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Policy
from argwatch.server.policytest.case_sources import CaseRecords, CaseSets
from argwatch.server.records.lookup_client import Lookup
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.repair.tracker import RepairTracker
from argwatch.server.sets.payload import SetPayload
from argwatch.server.sets.scoped import scope_key
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.call_signatures import CallSignatures
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator import Validator
from argwatch.server.validator.quick_verdict import QuickVerdict
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.decision import Decision, Verdict, allowed
from argwatch.server.verdict.per_tool import PerTool
from argwatch.server.verdict.tool_call import ToolCall

POLICY: dict[str, Any] = {
    "sources": {
        "owner": {"grpc": {"target": "127.0.0.1:1", "timeout": "1s"}},
        "cold": {"grpc": {"target": "127.0.0.1:2", "timeout": "1s"}},  # its records never in the cache
    },
    "value_sets": {
        "refunds.reason_codes": {"source": "owner"},
        "refunds.currencies": {"source": "owner", "ttl": "30s", "on_stale": "observe"},  # stale once the clock moves
        "gone.open": {"source": "owner", "failure": "open"},
        "billing.payment_methods": {"source": "owner", "scope": "customer_id"},
        "gone.set": {"source": "owner"},  # never served: unavailable (closed)
        "hidden.codes": {"source": "owner", "disclose": "none"},
    },
    "tools": {
        "membership": {
            "arguments": {
                "reason_code": {"value_set": "refunds.reason_codes"},
                "currency": {"value_set": "refunds.currencies"},
                "fallback": {"value_set": "refunds.reason_codes"},
            }
        },
        "in_reject": {"mode": "reject", "arguments": {"reason_code": {"value_set": "refunds.reason_codes"}}},
        "scoped": {"arguments": {"payment_method_id": {"value_set": "billing.payment_methods"}}},
        "with_schema": {
            "arguments": {"reason_code": {"value_set": "refunds.reason_codes"}},
            "schema": {
                "type": "object",
                "properties": {"reason_code": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1}},
                "required": ["reason_code"],
            },
        },
        "with_records": {
            "arguments": {"reason_code": {"value_set": "refunds.reason_codes"}},
            "records": {
                "order": {"source": "owner", "kind": "order", "id_argument": "order_id", "owner": "customer_id"}
            },
            "rules": [
                {
                    "name": "within_paid",
                    "expr": "args.amount_cents <= record.order.paid_cents",
                    "types": {"amount_cents": "integer"},
                }
            ],
        },
        "with_cold_records": {
            "arguments": {"code": {"value_set": "hidden.codes"}},
            "records": {
                "order": {"source": "cold", "kind": "order", "id_argument": "order_id", "owner": "customer_id"}
            },
        },
        "unavailable": {
            "arguments": {"thing": {"value_set": "gone.set"}, "other": {"value_set": "gone.open", "required": False}}
        },
        "nested": {"arguments": {"items[*].reason": {"value_set": "refunds.reason_codes"}}},
        "with_side_effect": {
            "arguments": {
                "reason_code": {"value_set": "refunds.reason_codes"},
                "order_id": {"value_set": "refunds.currencies", "required": False},
            },
            "side_effect": {"same_operation": ["order_id"], "status_tool": "status"},
        },
        "status": {"arguments": {"order_id": {"value_set": "refunds.currencies", "required": False}}},
        "bare": {},
    },
    "models": {"names": ["model-a"], "prompt_versions": ["v1"]},
    "sampling": {"rate": 1.0, "redact": ["currency"]},
}
SETS = {
    "refunds.reason_codes": SetPayload("refunds.reason_codes", 1, ["DAMAGED", "LATE", "WRONG_ITEM"]),
    "refunds.currencies": SetPayload("refunds.currencies", 1, ["EUR", "USD"]),
    "hidden.codes": SetPayload("hidden.codes", 1, ["H1", "H2"]),
    "billing.payment_methods": SetPayload(
        "billing.payment_methods",
        1,
        [scope_key("cus_1", "pm_1"), scope_key("cus_2", "pm_2")],
        scoped=True,
    ),
}
ORDERS: dict[str, dict[str, dict[str, Any]]] = {
    "order": {"ord_1": {"customer_id": "cus_1", "paid_cents": 500}, "ord_2": {"customer_id": "cus_2"}}
}
# Tools a call of which may pass everything, those whose every call needs the general path, and one whose
# calls could pass but whose set is never there to check against.
QUICK = {"membership", "in_reject", "scoped", "with_schema", "with_records", "with_cold_records", "bare"}
GENERAL = {"nested", "with_side_effect", "status"}
UNAVAILABLE = "unavailable"
ADVANCE = "(the clock moves on a minute)"  # a step, not a call: refunds.currencies goes stale


class Cold(CaseRecords):
    """A record source whose answers are never in the cache: each call's records are looked up."""

    def cached(self, kind: str, record_id: str) -> Lookup | None:
        return None


class Judge:
    """A Validator over the test's sets and records, with metrics of its own; `quick` False: the general path
    (its quick_verdict then answers nothing either)."""

    def __init__(self, policy: Policy, loop: asyncio.AbstractEventLoop, quick: bool, clock: list[float]) -> None:
        self.registry = CollectorRegistry()
        metrics = GatewayMetrics(self.registry)
        cache = SharedCache(None, metrics)
        fetchers = dict.fromkeys(policy.sources, CaseSets(SETS))
        self.provider = ValueSetProvider(policy, fetchers, cache, metrics, monotonic=lambda: clock[0])
        self.signatures = CallSignatures()
        self.validator = Validator(
            policy,
            self.provider,
            ModeStore(policy),
            metrics,
            SampledValueLog(1.0, 100),
            RejectionLog(cache, policy.repair),
            {"owner": CaseRecords(ORDERS), "cold": Cold(ORDERS)},
            OffenderTable(),
            signatures=self.signatures,
            repairs=RepairTracker(cache, metrics, policy.repair.remember_seconds),
        )
        if not quick:
            self.validator._quick = PerTool(policy.tools, lambda tool: None)
        self.loop = loop
        loop.run_until_complete(self.provider.start(5.0))

    def judge(self, call: ToolCall) -> Verdict:
        """As the servicers judge: the verdict made without awaiting, where there is one, else validate's."""
        verdict = self.validator.quick_verdict(call)
        return verdict if verdict is not None else self.loop.run_until_complete(self.validator.validate(call))

    def counts(self) -> list[str]:
        return metric_lines(self.registry)

    def close(self) -> None:
        self.loop.run_until_complete(self.provider.close())


def metric_lines(registry: CollectorRegistry) -> list[str]:
    """Every metric line but clock readings: the sets' ages, and when each series was created."""
    text = generate_latest(registry).decode()
    return [
        line
        for line in text.splitlines()
        if not line.startswith("argwatch_value_set_age_seconds")
        and not line.partition("{")[0].partition(" ")[0].endswith("_created")
    ]


def policy() -> Policy:
    return parse_policy(json.dumps(POLICY).encode(), "/srv/policy.yaml")


def comparable(verdict: Verdict) -> tuple[Any, ...]:
    """The verdict with each set reading as (set, version, stale): two judges hold equal copies, not the same."""
    readings = tuple((r.snapshot.name, r.snapshot.version, r.stale) for r in verdict.readings_used)
    return (*verdict._replace(readings_used=()), readings)


value = st.sampled_from(["DAMAGED", "LATE", "EUR", "pm_1", "pm_2", "ord_1", "ord_2", "", "damaged", 7, None, True])
arguments_drawn = st.fixed_dictionaries(
    {},
    optional={
        "reason_code": st.sampled_from(["DAMAGED", "DAMAGED", "LATE", "damaged", "NOPE", 3]),
        "currency": st.sampled_from(["EUR", "EUR", "USD", "eur", None]),
        "fallback": value,
        "payment_method_id": st.sampled_from(["pm_1", "pm_1", "pm_2", "pm_x", ""]),
        "code": st.sampled_from(["H1", "H1", "H3", "h1", 1]),
        "amount_cents": st.sampled_from([1, 100, 500, 501, 0, "1", 1.5]),
        "order_id": st.sampled_from(["ord_1", "ord_1", "ord_2", "ord_9", "", 5]),
        "thing": value,
        "other": value,
        "items": st.sampled_from([[], [{"reason": "LATE"}], [{"reason": "NOPE"}]]),
    },
)
call_drawn = st.tuples(
    st.sampled_from(sorted(QUICK | GENERAL | {UNAVAILABLE, "no_such_tool", ADVANCE})),
    st.one_of(arguments_drawn, st.none()),
    st.sampled_from(["cus_1", "cus_1", "cus_2", ""]),
    st.sampled_from(["", "conv-1"]),
    st.sampled_from(["", "model-a", "model-z"]),
)


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(call_drawn, min_size=1, max_size=25))
def test_a_quick_verdict_is_the_general_paths_verdict_counted_the_same(
    calls: list[tuple[str, dict[str, Any] | None, str, str, str]],
) -> None:
    loop = asyncio.new_event_loop()
    judged = policy()
    clock = [1000.0]
    quick, general = Judge(judged, loop, True, clock), Judge(judged, loop, False, clock)
    try:
        for index, (tool, arguments, customer, conversation, model) in enumerate(calls):
            if tool == ADVANCE:
                clock[0] += 60
                continue
            call = ToolCall(
                tool,
                arguments,
                f"call-{index}",
                conversation,
                customer,
                "acme",
                "" if arguments is not None else "not valid JSON",
                json.dumps(arguments).encode(),
                model,
                "v1",
            )
            assert comparable(quick.judge(call)) == comparable(general.judge(call)), call
        assert quick.counts() == general.counts()
        assert quick.signatures.counts() == general.signatures.counts()
    finally:
        quick.close()
        general.close()
        loop.close()


def quick_of(validator: Validator, tool: str) -> QuickVerdict:
    quick = validator._quick[tool]
    assert quick is not None, tool
    return quick


CLEAN_ARGUMENTS: dict[str, dict[str, Any]] = {
    "membership": {"reason_code": "DAMAGED", "currency": "EUR", "fallback": "LATE"},
    "in_reject": {"reason_code": "LATE"},
    "scoped": {"payment_method_id": "pm_1"},
    "with_schema": {"reason_code": "DAMAGED", "amount_cents": 3},
    "with_records": {"reason_code": "DAMAGED", "order_id": "ord_1", "amount_cents": 500},
    "with_cold_records": {"code": "H2", "order_id": "ord_1"},
    "bare": {"anything": 1},
    "unavailable": {"thing": "x"},
    "nested": {"items": [{"reason": "LATE"}]},
    "with_side_effect": {"reason_code": "DAMAGED", "order_id": "ord_1"},
    "status": {"order_id": "EUR"},
}


def clean_call(tool: str) -> ToolCall:
    arguments = CLEAN_ARGUMENTS[tool]
    return ToolCall(tool, arguments, "call-1", "", "cus_1", "acme")


def test_the_clean_calls_of_tools_that_can_have_one_are_answered_quickly_and_no_other() -> None:
    loop = asyncio.new_event_loop()
    judge = Judge(policy(), loop, True, [1000.0])
    try:
        validator = judge.validator
        for tool in sorted(QUICK - {"with_cold_records"}):
            verdict = quick_of(validator, tool).verdict(clean_call(tool))
            assert verdict is not None and verdict.decision is Decision.ALLOW, tool
        # Its record not in the cache: the general path looks it up (and passes the call).
        assert quick_of(validator, "with_cold_records").verdict(clean_call("with_cold_records")) is None
        assert judge.judge(clean_call("with_cold_records")).decision is Decision.ALLOW
        assert all(validator._quick[tool] is None for tool in GENERAL)
        assert quick_of(validator, UNAVAILABLE).verdict(clean_call(UNAVAILABLE)) is None  # a skip or a problem
        # One fault, and the general path is asked: never a quick answer that a call passed.
        assert quick_of(validator, "scoped").verdict(clean_call("scoped")._replace(customer_id="cus_2")) is None
        above_paid = {"reason_code": "DAMAGED", "order_id": "ord_1", "amount_cents": 501}
        assert (
            quick_of(validator, "with_records").verdict(clean_call("with_records")._replace(arguments=above_paid))
            is None
        )
    finally:
        judge.close()
        loop.close()


def test_a_judgment_that_records_nothing_has_no_quick_verdict() -> None:
    """A shadow's Validator (counted=False) records nothing; the quick verdict counts, so it is never used."""
    judged = policy()
    metrics = GatewayMetrics(CollectorRegistry())
    cache = SharedCache(None, metrics)
    validator = Validator(
        judged,
        ValueSetProvider(judged, dict.fromkeys(judged.sources, CaseSets(SETS)), cache, metrics),
        ModeStore(judged),
        metrics,
        SampledValueLog(0.0, 1),
        RejectionLog(cache, judged.repair),
        {},
        OffenderTable(),
        counted=False,
    )
    assert all(validator._quick[tool] is None for tool in QUICK | GENERAL)


def test_allowed_builds_the_verdict_the_constructor_builds() -> None:
    from argwatch.server.policy.model import Mode

    assert allowed("c", Mode.REJECT, (), "v3") == Verdict("c", Decision.ALLOW, Mode.REJECT, (), (), (), "v3")


def test_a_quick_pass_closes_the_repair_its_conversation_opened() -> None:
    loop = asyncio.new_event_loop()
    clock = [1000.0]
    quick, general = Judge(policy(), loop, True, clock), Judge(policy(), loop, False, clock)
    try:
        for judge in (quick, general):
            refused = clean_call("in_reject")._replace(arguments={"reason_code": "NOPE"}, conversation_id="conv-1")
            assert judge.judge(refused).decision is Decision.REJECT
            assert judge.judge(clean_call("in_reject")._replace(conversation_id="conv-1")).decision is Decision.ALLOW
        succeeded = 'tool_argument_repair_succeeded_total{tool="in_reject"} 1.0'
        assert succeeded in quick.counts()
        assert quick.counts() == general.counts()
    finally:
        quick.close()
        general.close()
        loop.close()


def test_a_set_gone_stale_is_judged_by_the_general_path() -> None:
    """Stale: counted as a check against a stale set, and in reject mode with on_stale: observe, judged in
    observe (the general path's); the quick verdict never answers for it."""
    loop = asyncio.new_event_loop()
    clock = [1000.0]
    quick, general = Judge(policy(), loop, True, clock), Judge(policy(), loop, False, clock)
    try:
        call = clean_call("membership")
        clock[0] += 60  # refunds.currencies (ttl 30s) is stale now
        assert quick_of(quick.validator, "membership").verdict(call) is None  # (and so counted nothing)
        verdicts = [judge.judge(call) for judge in (quick, general)]
        assert comparable(verdicts[0]) == comparable(verdicts[1])
        assert any(reading.stale for reading in verdicts[0].readings_used)
        assert quick.counts() == general.counts()
    finally:
        quick.close()
        general.close()
        loop.close()


class Tap:
    """A shadow loaded: takes each decided call (ShadowTap)."""

    active = True

    def __init__(self) -> None:
        self.offered: list[str] = []

    def offer(self, call: ToolCall, verdict: Verdict, live: Policy) -> None:
        self.offered.append(call.call_id)


def test_quick_verdict_answers_nothing_while_a_shadow_or_a_repair_needs_the_call() -> None:
    """A verdict made without awaiting skips validate's wrapper (a shadow, a decision log) and the close of an
    open repair: quick_verdict then answers None and counts nothing, and validate does both."""
    loop = asyncio.new_event_loop()
    judge = Judge(policy(), loop, True, [1000.0])
    try:
        validator, call = judge.validator, clean_call("membership")
        assert validator.quick_verdict(call) is not None
        tap = Tap()
        validator._shadow = tap
        validator.shadow_changed()
        before = judge.counts()
        assert validator.quick_verdict(call) is None and judge.counts() == before
        assert judge.judge(call).decision is Decision.ALLOW and tap.offered == ["call-1"]
        tap.active = False
        validator.shadow_changed()
        assert validator.quick_verdict(call) is not None and tap.offered == ["call-1"]
        # A refusal in reject mode opens a repair in its conversation: the next call there goes to validate.
        in_conversation = clean_call("in_reject")._replace(conversation_id="conv-1")
        judge.judge(in_conversation._replace(arguments={"reason_code": "NOPE"}))
        before = judge.counts()
        assert validator.quick_verdict(in_conversation) is None and judge.counts() == before
        assert validator.quick_verdict(in_conversation._replace(conversation_id="")) is not None
    finally:
        judge.close()
        loop.close()
