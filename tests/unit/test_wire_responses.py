"""Responses built from prototypes: each call keeps its own id, and a changed set version is never served stale."""

from __future__ import annotations

from argwatch.server.edge import wire
from argwatch.server.policy.model import Mode
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode
from argwatch.v1 import gateway_pb2 as pb
from tests.snapshots import make_snapshot


def response(verdict: Verdict) -> pb.ValidateResponse:
    return pb.ValidateResponse.FromString(wire.verdict_to_wire(verdict))


def verdict(call_id: str, reading: SetReading) -> Verdict:
    return Verdict(call_id, Decision.ALLOW, Mode.OBSERVE, (), (), (reading,), "policy-1")


def test_two_calls_get_their_own_ids_and_the_same_versions() -> None:
    reading = SetReading(make_snapshot("codes", 4, ["A", "B"], received_at=100.0), 100.0, False)
    first, second = (
        response(verdict("call-1", reading)),
        response(verdict("call-2", reading)),
    )
    assert (first.call_id, second.call_id) == ("call-1", "call-2")
    assert [(v.name, v.version, v.stale) for v in second.value_sets] == [("codes", 4, False)]
    first.value_sets[0].version = 99  # a caller changing its response changes no other
    assert response(verdict("call-3", reading)).value_sets[0].version == 4


def test_a_new_version_or_a_stale_copy_is_reported_as_it_is() -> None:
    old = SetReading(make_snapshot("codes", 4, ["A"], received_at=100.0), 100.0, False)
    response(verdict("call-1", old))
    newer = SetReading(make_snapshot("codes", 5, ["A", "C"], received_at=200.0), 200.0, False)
    stale = newer._replace(stale=True)
    assert response(verdict("call-2", newer)).value_sets[0].version == 5
    assert response(verdict("call-3", stale)).value_sets[0].stale is True


def test_the_serialized_prototype_is_the_message_built_in_full() -> None:
    reading = SetReading(make_snapshot("codes", 4, ["A", "B"], received_at=100.0), 100.0, True)
    for call_id in ("c", "x" * 127, "y" * 128, "z" * 20_000, "appel-été-✓"):
        clean = verdict(call_id, reading)
        sent = wire.verdict_to_wire(clean)
        assert pb.ValidateResponse.FromString(sent) == wire._built(clean), call_id


def test_a_verdict_with_problems_is_built_in_full() -> None:
    reading = SetReading(make_snapshot("codes", 4, ["A"], received_at=100.0), 100.0, False)
    problem = Problem(ProblemCode.OUT_OF_SET, "code: 'Z' is not in codes", argument="code", value='"Z"')
    rejected = verdict("call-9", reading)._replace(decision=Decision.REJECT, mode=Mode.REJECT, problems=(problem,))
    response = pb.ValidateResponse.FromString(wire.verdict_to_wire(rejected))
    assert response.call_id == "call-9" and response.decision == pb.DECISION_REJECT
    assert [(p.argument, p.value) for p in response.problems] == [("code", '"Z"')]
