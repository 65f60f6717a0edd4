"""A call answered from its bytes (edge/native_answers.py, _answers.c) gets the Python path's bytes and is counted
the same; the calls it must not answer (a guard moved, a value out of its set, anything unusual in the request)
it leaves to the Python path, and only tools whose quick verdict is membership alone are ever armed."""

from __future__ import annotations

import asyncio
import json
import math
import random
from time import perf_counter
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from argwatch.server.edge import wire
from argwatch.server.edge._answers import Answers
from argwatch.server.edge.native_answers import NativeAnswers, NativePlan
from argwatch.server.edge.request_limits import FIELD_LIMITS, TooLong
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode, Policy
from argwatch.server.policytest.case_sources import CaseRecords, CaseSets
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.repair.tracker import RepairTracker
from argwatch.server.sets.payload import SetPayload
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry._buckets import Buckets
from argwatch.server.telemetry.call_signatures import CallSignatures
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.telemetry.tallies import Tally
from argwatch.server.validator import Validator
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.call_signature import NO_PROBLEMS
from argwatch.v1 import gateway_pb2
from tests.unit.test_quick_verdict import ORDERS, POLICY, SETS, metric_lines

# The quick verdict's policy with no models declared (a per-model count keeps every tool unarmed, below).
NO_MODELS: dict[str, Any] = {key: value for key, value in POLICY.items() if key != "models"}
ARMED = {"membership", "in_reject", "bare"}  # membership alone; the others have a schema, records or a scope
ADVANCE, FLIP, RELOAD = "(the clock moves on)", "(on-call flips in_reject)", "(a set's new version)"


class Gateway:
    """A Validator over the test's sets, answering request bytes as the servicers do; `native`: with answers."""

    def __init__(self, policy: Policy, loop: asyncio.AbstractEventLoop, native: bool, clock: list[float]) -> None:
        self.registry = CollectorRegistry()
        self.metrics = metrics = GatewayMetrics(self.registry)
        cache = SharedCache(None, metrics)
        self.sets = CaseSets(dict(SETS))
        self.provider = ValueSetProvider(
            policy,
            dict.fromkeys(policy.sources, self.sets),
            cache,
            metrics,
            clock=lambda: 1_800_000_000.0,  # one wall clock for both: the sets' confirmation times are answered
            monotonic=lambda: clock[0],
        )
        self.signatures = CallSignatures()
        self.modes = ModeStore(policy)
        repairs = RepairTracker(cache, metrics, policy.repair.remember_seconds)
        self.answers = (
            NativeAnswers(self.provider, self.modes, repairs, self.signatures, metrics.validate_seconds.buckets)
            if native
            else None
        )
        self.validator = Validator(
            policy,
            self.provider,
            self.modes,
            metrics,
            SampledValueLog(1.0, 100),
            RejectionLog(cache, policy.repair),
            {"owner": CaseRecords(ORDERS), "cold": CaseRecords(ORDERS)},
            OffenderTable(),
            signatures=self.signatures,
            repairs=repairs,
            answers=self.answers,
        )
        self.loop = loop
        self.answered = 0  # calls answered from their bytes
        loop.run_until_complete(self.provider.start(5.0))

    def serve(self, body: bytes) -> bytes:
        """As the servicers serve it: answered from its bytes, or read, judged and its latency observed here."""
        started = perf_counter()
        response = self.validator.answer(body, started)
        if response is not None:
            self.answered += 1
            return response
        try:
            call = wire.call_from_body(body)
        except (DecodeError, TooLong) as error:  # the servicer refuses it with this status's details
            return f"refused: {error}".encode()
        verdict = self.validator.quick_verdict(call) or self.loop.run_until_complete(self.validator.validate(call))
        self.metrics.validate_seconds.observe(perf_counter() - started)
        return wire.verdict_to_wire(verdict)

    def counts(self) -> list[str]:
        """Every metric line but the latencies' buckets and sum (times differ): their count is compared."""
        return [
            line
            for line in metric_lines(self.registry)
            if not line.startswith(("argwatch_validate_seconds_bucket", "argwatch_validate_seconds_sum"))
        ]

    def close(self) -> None:
        self.loop.run_until_complete(self.provider.close())


def request(tool: str, arguments: bytes | None, call_id: str, conversation: str, customer: str) -> bytes:
    message = gateway_pb2.ValidateRequest(
        tool=tool,
        call_id=call_id,
        conversation_id=conversation,
        session=gateway_pb2.Session(customer_id=customer, tenant="acme"),
    )
    if arguments is not None:
        message.arguments_json = arguments
    return message.SerializeToString()


def same_answer(native: bytes, python: bytes, call_id: str) -> None:
    """Byte for byte, but where the gateway minted the call id (a random one on each side)."""
    if call_id or native.startswith(b"refused"):
        assert native == python
        return
    ours, theirs = gateway_pb2.ValidateResponse(), gateway_pb2.ValidateResponse()
    ours.ParseFromString(native)
    theirs.ParseFromString(python)
    ours.call_id = theirs.call_id = ""
    assert ours == theirs


argument_values = st.sampled_from(["DAMAGED", "DAMAGED", "LATE", "EUR", "USD", "damaged", "", 3, None, ["LATE"]])


def as_json(arguments: dict[str, Any]) -> bytes:
    """Written by Python's json (integers of any size; orjson refuses those past 64 bits, as a reader too)."""
    return json.dumps(arguments, ensure_ascii=False).encode()


# Mostly a call every armed tool passes (so that tools are armed and then answer), with a value drawn at times.
clean_drawn = st.fixed_dictionaries(
    {
        "reason_code": st.sampled_from(["DAMAGED", "DAMAGED", "DAMAGED", "LATE", "NOPE"]),
        "currency": st.sampled_from(["EUR", "EUR", "USD", "eur"]),
        "fallback": st.sampled_from(["LATE", "LATE", "DAMAGED", 3]),
    },
    optional={"note": st.sampled_from(["crushed", "écrasé", "\u00e9", ""]), "amount_cents": st.integers(0, 10**20)},
).map(as_json)
arguments_drawn = st.one_of(
    clean_drawn,
    clean_drawn,
    clean_drawn,
    st.fixed_dictionaries(
        {},
        optional={
            "reason_code": argument_values,
            "currency": argument_values,
            "fallback": argument_values,
            "payment_method_id": st.sampled_from(["pm_1", "pm_2"]),
            "amount_cents": st.sampled_from([1, 3, 0]),
            "anything": st.sampled_from([1, "é", {"deep": [1, 2]}]),
        },
    ).map(as_json),
    st.sampled_from(
        [
            None,  # absent
            b"",
            b"not json",
            b"[1, 2]",
            b'"DAMAGED"',
            b'{"reason_code": "DAMAGED", "reason_code": "NOPE", "currency": "EUR", "fallback": "LATE"}',
            b'{"reason_code": "DAMAGED", "currency": "EUR", "fallback": "LATE", "x": NaN}',
            b'{"reason_code": "\\u0044AMAGED", "currency": "EUR", "fallback": "LATE"}',
            b'{"reason_code": "DAMAGED", "currency": "EUR", "fallback": "LATE"',
        ]
    ),
)
call_drawn = st.tuples(
    st.sampled_from(sorted(ARMED) * 3 + ["with_schema", "scoped", "nested", "no_such_tool"]),
    arguments_drawn,
    st.sampled_from(["call-1"] * 4 + ["", "appel-é", "c" * 128, "c" * 129, "é" * 64, "é" * 65]),
    st.sampled_from(["", "", "conv-1", "conv-2"]),
    st.sampled_from(["cus_1", "cus_1", "", "x" * 300]),
)
# Calls mostly, events at times.
step_drawn = st.one_of(call_drawn, call_drawn, call_drawn, call_drawn, st.sampled_from([ADVANCE, FLIP, RELOAD]))


@settings(max_examples=120, deadline=None)
@given(steps=st.lists(step_drawn, min_size=10, max_size=40))
def test_a_call_answered_from_its_bytes_gets_the_python_paths_bytes_and_counts(steps: list[Any]) -> None:
    answered_alike(steps)


def test_a_long_walk_of_calls_and_events_is_answered_alike_and_mostly_from_bytes() -> None:
    """Thousands of steps in one run (hypothesis's runs are short): the guards met in every order."""
    chosen = random.Random(31)
    tools = [*sorted(ARMED) * 4, "with_schema", "scoped", "no_such_tool"]
    codes, currencies = ["DAMAGED"] * 8 + ["LATE", "NOPE", 3], ["EUR"] * 8 + ["USD", "eur", None]
    steps: list[Any] = []
    for _ in range(3_000):
        if chosen.random() < 0.02:
            steps.append(chosen.choice([ADVANCE, FLIP, RELOAD]))
            continue
        arguments = {"reason_code": chosen.choice(codes), "currency": chosen.choice(currencies), "fallback": "DAMAGED"}
        if chosen.random() < 0.3:
            arguments["note"] = chosen.choice(["crushed", "écrasé", "x" * 500])
        steps.append(
            (
                chosen.choice(tools),
                as_json(arguments) if chosen.random() < 0.97 else chosen.choice([None, b"[]", b"{"]),
                chosen.choice(["call-1", "call-2", "", "é" * 65]),
                chosen.choice(["", "", "conv-1"]),
                chosen.choice(["cus_1", "cus_2", ""]),
            )
        )
    assert answered_alike(steps) > 500  # 655 with this seed


def answered_alike(steps: list[Any]) -> int:
    """Both gateways take `steps`; every answer and every count alike. How many were answered from bytes."""
    loop = asyncio.new_event_loop()
    judged = parse_policy(json.dumps(NO_MODELS).encode(), "/srv/policy.yaml")
    clock = [1000.0]
    native, python = Gateway(judged, loop, True, clock), Gateway(judged, loop, False, clock)
    version = [1]
    try:
        for step in steps:
            if step == ADVANCE:  # refunds.currencies (ttl 30 s) goes stale; the guard's time has passed
                clock[0] += 60
            elif step == FLIP:
                for gateway in (native, python):
                    now = gateway.modes.mode_for("in_reject")
                    flipped = Mode.OBSERVE if now is Mode.REJECT else Mode.REJECT
                    gateway.modes.set_mode("in_reject", flipped, actor="ana", reason="INC-1")
            elif step == RELOAD:  # a new version of each set: reason codes with LATE retired, currencies confirmed
                version[0] += 1
                payloads = (
                    SetPayload("refunds.reason_codes", version[0], ["DAMAGED", "WRONG_ITEM"]),
                    SetPayload("refunds.currencies", version[0], ["EUR", "USD"]),
                )
                for gateway in (native, python):
                    table = gateway.provider._table
                    for payload in payloads:
                        state = table.states[payload.name]
                        assert gateway.loop.run_until_complete(table.install(state, payload, save=False))
            else:
                tool, arguments, call_id, conversation, customer = step
                body = request(tool, arguments, call_id, conversation, customer)
                same_answer(native.serve(body), python.serve(body), call_id)
        assert native.counts() == python.counts()
        assert native.signatures.counts() == python.signatures.counts()
        assert python.answered == 0
        return native.answered
    finally:
        native.close()
        python.close()
        loop.close()


CLEAN = orjson.dumps({"reason_code": "DAMAGED", "currency": "EUR", "fallback": "LATE", "note": "crushed"})


def test_the_calls_a_tool_armed_answers_and_what_disarms_it() -> None:
    loop = asyncio.new_event_loop()
    clock = [1000.0]
    gateway = Gateway(parse_policy(json.dumps(NO_MODELS).encode(), "/srv/policy.yaml"), loop, True, clock)
    try:
        clean = request("membership", CLEAN, "call-1", "conv-1", "cus_1")
        assert gateway.validator.answer(clean, 0.0) is None  # not armed before its quick verdict passed a call
        gateway.serve(clean)
        assert gateway.validator.answer(clean, 0.0) is not None  # armed: answered from its bytes
        # Only tools whose quick verdict is membership alone are armed.
        for tool, arguments in (("with_schema", {"reason_code": "DAMAGED"}), ("scoped", {"payment_method_id": "pm_1"})):
            body = request(tool, orjson.dumps(arguments), "call-2", "", "cus_1")
            gateway.serve(body)
            assert gateway.validator.answer(body, 0.0) is None, tool
        # A value out of its set: the Python path says what is wrong.
        assert (
            gateway.validator.answer(request("membership", CLEAN.replace(b"LATE", b"NOPE"), "c", "", ""), 0.0) is None
        )
        # A repair opened in reject mode: a call with a conversation may close it, so the Python path takes it;
        # one without a conversation closes nothing and is still answered.
        gateway.serve(request("in_reject", b'{"reason_code": "NOPE"}', "call-3", "conv-1", "cus_1"))
        assert gateway.validator.answer(clean, 0.0) is None
        assert gateway.validator.answer(request("membership", CLEAN, "call-4", "", "cus_1"), 0.0) is not None
        # The clock past the set's TTL (30 s): stale, so not answered, and the plan dropped (a call the quick
        # verdict passes once the sets are fresh arms the tool again: the long walk's re-armings).
        clock[0] += 31
        assert gateway.validator.answer(request("membership", CLEAN, "call-5", "", "cus_1"), 0.0) is None
        assert gateway.answers is not None and b"membership" not in gateway.answers._answers.armed()
    finally:
        gateway.close()
        loop.close()


def test_no_tool_is_armed_where_calls_are_counted_per_model() -> None:
    loop = asyncio.new_event_loop()
    gateway = Gateway(parse_policy(json.dumps(POLICY).encode(), "/srv/policy.yaml"), loop, True, [1000.0])
    try:
        clean = request("membership", CLEAN, "call-1", "", "cus_1")
        gateway.serve(clean)
        assert gateway.validator.answer(clean, 0.0) is None
        assert gateway.answers is not None and gateway.answers._answers.armed() == {}
    finally:
        gateway.close()
        loop.close()


def test_a_tally_type_whose_slot_is_not_its_own_is_refused() -> None:
    """Tallies are counted through their value slot's offset: only a type whose slot it is, written the generic
    way, is taken (another type's descriptor would write past the object)."""

    class Wide:
        __slots__ = ("a", "b", "c", "value")

    class Borrowing:
        __slots__ = ()
        value = Wide.__dict__["value"]

    class Guarded:
        __slots__ = ("value",)

        def __setattr__(self, name: str, value: object) -> None:
            object.__setattr__(self, name, value)

    for tally in (Borrowing, Guarded, int):
        with pytest.raises(TypeError, match="slot"):
            Answers(FIELD_LIMITS, tally, Buckets((1.0,)))
    Answers(FIELD_LIMITS, Tally, Buckets((1.0,)))


def test_offer_builds_a_plan_only_for_a_tool_without_one_and_a_stale_plan_is_dropped_by_any_call() -> None:
    answers = Answers(FIELD_LIMITS, Tally, Buckets((1.0,)))
    built: list[tuple[object, ...]] = []
    answers.offer(lambda *given: built.append(given), b"t", "bindings", "meters")
    assert built == [(b"t", "bindings", "meters")]
    state = SimpleNamespace(generation=1)
    open_repairs = {("conv-1", "call-0"): object()}
    plan = NativePlan(math.inf, None, (), ((state, "generation", 1),), open_repairs, (), (), None, None, 0, b"")
    answers.arm(b"t", plan)
    answers.offer(lambda *given: built.append(given), b"t", "bindings", "meters")
    assert len(built) == 1  # armed: nothing built
    alone, in_conversation = request("t", b"{}", "call-1", "", "cus_1"), request("t", b"{}", "call-2", "conv-1", "")
    assert answers.answer(alone, 0.0) is not None
    # A repair open: this call is not answered, the plan kept for the others.
    assert answers.answer(in_conversation, 0.0) is None and b"t" in answers.armed()
    # The set's state moved on: found stale by any call, even one a repair would have kept from an answer.
    state.generation = 2
    assert answers.answer(in_conversation, 0.0) is None and b"t" not in answers.armed()
    answers.offer(lambda *given: built.append(given), b"t", "bindings", "meters")
    assert len(built) == 2
    # A stale plan no call reaches answer with (each one traced, say): one offer in 64 finds it stale and
    # builds afresh, so it holds no old set reading for long.
    state.generation = 1
    answers.arm(b"t", plan)
    state.generation = 3
    offers = 0
    while len(built) == 2 and offers < 64:
        answers.offer(lambda *given: built.append(given), b"t", "bindings", "meters")
        offers += 1
    assert len(built) == 3 and b"t" not in answers.armed()
    with pytest.raises(TypeError, match="offer takes"):
        answers.offer(print)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="offer takes"):
        answers.offer(print, "t")  # type: ignore[arg-type]


def test_a_plan_counts_its_signature_by_the_hash_arm_checked_and_the_key_the_counts_hold() -> None:
    signatures = CallSignatures()
    signatures.count("t", NO_PROBLEMS)
    signatures.count("t", NO_PROBLEMS)
    counts, key = signatures.kept_count("t", NO_PROBLEMS)
    assert counts[key] == 2 and next(iter(counts)) is key  # the count kept, under the object returned
    answers = Answers(FIELD_LIMITS, Tally, Buckets((1.0,)))
    wrong = NativePlan(math.inf, None, (), (), {}, (), (), counts, key, hash(key) + 1, b"")
    with pytest.raises(ValueError, match="signature_hash"):
        answers.arm(b"t", wrong)
    answers.arm(b"t", wrong._replace(signature_hash=hash(key)))
    assert answers.answer(request("t", b"{}", "call-1", "", "cus_1"), 0.0) is not None
    assert signatures.counts() == {("t", NO_PROBLEMS): 3}
    # Forgotten, then counted again under another tuple: the plan's look-up compares, and still counts it.
    signatures.forget([key])
    signatures.count("t", NO_PROBLEMS)
    assert answers.answer(request("t", b"{}", "call-2", "", "cus_1"), 0.0) is not None
    assert signatures.counts() == {("t", NO_PROBLEMS): 2}
