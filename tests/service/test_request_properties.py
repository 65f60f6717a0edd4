"""Any request gets a verdict, and the same verdict when sent again: hypothesis over the request space."""

from __future__ import annotations

import json

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import REASON_CODES, GatewayFactory

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from([*REASON_CODES, "damaged item", "DAMAGED-ITEM", "BROKEN", "user0001", "AMS-1", ""]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
arguments = st.one_of(
    # JSON objects over the policy's argument names and others.
    st.dictionaries(
        st.sampled_from(["reason_code", "assignee", "warehouse_code", "order_id", "note", ""]) | st.text(max_size=10),
        json_values,
        max_size=5,
    ).map(lambda value: json.dumps(value).encode()),
    # Anything at all: truncated JSON, other JSON types, invalid UTF-8, random bytes.
    st.binary(max_size=120),
    st.sampled_from([b"", b"{", b"[]", b"null", b'"x"', b'{"reason_code": "DAMAGED_ITEM"', b'{"a": 1e999}']),
)
tools = st.sampled_from(["refund_order", "create_ticket", "transfer_stock"]) | st.text(max_size=40)


def outcome(response: pb.ValidateResponse) -> tuple[object, ...]:
    """What must not change between two sends (attempt counts and give-up are conversation state)."""
    return (
        response.decision,
        response.mode,
        tuple((p.code, p.argument, p.message, p.value, p.shape) for p in response.problems),
        tuple((s.argument, s.value_set) for s in response.skipped),
    )


async def test_any_request_gets_the_same_verdict_twice(gateway_factory: GatewayFactory) -> None:
    import asyncio

    gateway = await gateway_factory(refund_mode="reject")
    # Hypothesis drives blocking calls from a thread; the gateway serves them on this loop meanwhile.
    await asyncio.to_thread(examples, gateway)


def examples(gateway: RunningGateway) -> None:
    with grpc.insecure_channel(gateway.target) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)

        @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(tool=tools, raw=arguments)
        def one(tool: str, raw: bytes) -> None:
            request = pb.ValidateRequest(tool=tool, arguments_json=raw)
            first: pb.ValidateResponse = stub.Validate(request, timeout=10)
            again: pb.ValidateResponse = stub.Validate(request, timeout=10)
            assert outcome(first) == outcome(again)
            assert first.decision in (pb.DECISION_ALLOW, pb.DECISION_REJECT)
            codes = {pb.ProblemCode.Name(p.code) for p in first.problems}
            if tool not in gateway.policy.tools:
                assert "PROBLEM_CODE_UNKNOWN_TOOL" in codes
            if first.decision == pb.DECISION_REJECT:
                assert first.problems  # a refusal always says why
            for problem in first.problems:
                assert len(problem.value) <= 1024

        one()
