"""Side effects through a real gateway: idempotency keys, repeats caught and refused, outcomes, status checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from argwatch.server.policy.loader import parse_policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on, loopback_settings
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import gateway_stub, request, value

POLICY = """
    tools:
      refund_order:
        mode: reject
        schema:
          type: object
          properties:
            order_id: {type: string}
            amount_cents: {type: integer}
            note: {type: string}
          required: [order_id, amount_cents]
        side_effect:
          same_operation: [order_id, amount_cents]
          window: 10m
          status_tool: get_refund_status
      get_refund_status:
        mode: observe
        schema: {type: object, properties: {order_id: {type: string}}}
      issue_credit:
        mode: observe
        side_effect: true
"""
REFUND = {"order_id": "ord_1", "amount_cents": 1200, "note": "damaged in transit"}


def write_policy(folder: Path, text: str = POLICY) -> Any:
    path = folder / "policy.yaml"
    path.write_text(text)
    return parse_policy(text.encode(), str(path))


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    running = await gateway_on(tmp_path, POLICY)
    yield running
    await running.stop(0)


@pytest.fixture
async def stub(gateway: RunningGateway) -> AsyncIterator[Any]:
    channel, gateway_stub_ = gateway_stub(gateway)
    async with channel:
        yield gateway_stub_


async def refund(stub: Any, arguments: dict[str, Any] | None = None, conversation: str = "conv-1") -> Any:
    return await stub.Validate(request("refund_order", arguments or REFUND, conversation=conversation), timeout=5)


async def report(stub: Any, call_id: str, outcome: pb.Outcome, conversation: str = "conv-1") -> Any:
    """ReportOutcome, naming the call with the conversation its Validate had (the call is found only there)."""
    named = pb.ReportOutcomeRequest(call_id=call_id, outcome=outcome, conversation_id=conversation)
    return await stub.ReportOutcome(named, timeout=5)


async def test_a_repeat_in_the_window_is_refused_with_the_same_key_and_the_earlier_call(
    gateway: RunningGateway, stub: Any
) -> None:
    first = await refund(stub)
    assert first.decision == pb.DECISION_ALLOW and not first.problems
    assert first.idempotency_key.startswith("aw1_") and len(first.idempotency_key) == 36
    assert first.repeat_check == pb.REPEAT_CHECK_SHARED and not first.HasField("repeat_of")

    again = await refund(stub)
    assert again.decision == pb.DECISION_REJECT
    assert [p.code for p in again.problems] == [pb.PROBLEM_CODE_REPEATED_CALL]
    assert again.idempotency_key == first.idempotency_key
    earlier = again.repeat_of
    assert (earlier.call_id, earlier.outcome, earlier.calls, earlier.retry_allowed, earlier.status_tool) == (
        first.call_id,
        pb.OUTCOME_UNSPECIFIED,
        2,
        False,
        "get_refund_status",
    )
    assert earlier.seen_at.seconds > 0
    assert value(gateway.registry, "tool_call_repeat_total", tool="refund_order") == 1
    assert (
        value(
            gateway.registry,
            "tool_argument_problems_total",
            tool="refund_order",
            argument="_call",
            code="repeated_call",
        )
        == 1
    )
    # Not an argument to repair: the repair funnel does not count it.
    assert value(gateway.registry, "tool_argument_repair_started_total", tool="refund_order") == 0

    repair = await stub.Repair(pb.RepairRequest(call_id=again.call_id, conversation_id="conv-1"), timeout=5)
    assert not repair.executed
    message = repair.message
    assert "was not executed" in message and first.call_id in message and first.idempotency_key in message
    assert "the same order_id and amount_cents" in message
    assert "it may have succeeded" in message and "could do it twice" in message
    assert "call get_refund_status first" in message


async def test_a_different_amount_or_conversation_is_another_operation_and_a_note_is_not_identity(
    stub: Any,
) -> None:
    first = await refund(stub)
    other_amount = await refund(stub, {**REFUND, "amount_cents": 1300})
    other_conversation = await refund(stub, conversation="conv-2")
    assert other_amount.decision == other_conversation.decision == pb.DECISION_ALLOW
    keys = {first.idempotency_key, other_amount.idempotency_key, other_conversation.idempotency_key}
    assert len(keys) == 3
    assert not other_amount.HasField("repeat_of") and not other_conversation.HasField("repeat_of")

    # The model rewrote the free-text note: the same refund, the same key, still a repeat.
    reworded = await refund(stub, {**REFUND, "note": "customer says the box was crushed"})
    assert reworded.idempotency_key == first.idempotency_key
    assert reworded.decision == pb.DECISION_REJECT and reworded.repeat_of.call_id == first.call_id
    # Numbers are compared as numbers, and key order does not matter.
    as_float = await refund(stub, {"amount_cents": 1200.0, "order_id": "ord_1"})
    assert as_float.idempotency_key == first.idempotency_key


async def test_after_a_reported_failure_the_repeat_is_a_genuine_retry(gateway: RunningGateway, stub: Any) -> None:
    first = await refund(stub)
    reported = await report(stub, first.call_id, pb.OUTCOME_FAILED)
    assert (reported.idempotency_key, reported.outcome) == (first.idempotency_key, pb.OUTCOME_FAILED)

    retry = await refund(stub)
    assert retry.decision == pb.DECISION_ALLOW and not retry.problems
    assert retry.idempotency_key == first.idempotency_key  # the same operation: downstream dedupes it too
    assert retry.repeat_of.retry_allowed and retry.repeat_of.outcome == pb.OUTCOME_FAILED
    assert value(gateway.registry, "argwatch_repeat_retries_total", tool="refund_order", reason="after_failure") == 1
    assert value(gateway.registry, "tool_call_repeat_total", tool="refund_order") == 0

    # The retry is now the call that may have done it, its outcome unreported: a third call is a repeat of it.
    third = await refund(stub)
    assert third.decision == pb.DECISION_REJECT and third.repeat_of.call_id == retry.call_id


async def test_after_a_reported_success_a_repeat_is_refused_and_a_later_failure_report_changes_nothing(
    stub: Any,
) -> None:
    first = await refund(stub)
    await report(stub, first.call_id, pb.OUTCOME_SUCCEEDED)
    again = await refund(stub)
    assert again.decision == pb.DECISION_REJECT and again.repeat_of.outcome == pb.OUTCOME_SUCCEEDED

    message = (await stub.Repair(pb.RepairRequest(call_id=again.call_id, conversation_id="conv-1"), timeout=5)).message
    assert "It succeeded: its effect has already happened" in message
    assert "do not call refund_order again" in message and "already done" in message

    late = await report(stub, first.call_id, pb.OUTCOME_FAILED)  # a late, wrong report
    assert late.outcome == pb.OUTCOME_SUCCEEDED
    assert (await refund(stub)).decision == pb.DECISION_REJECT


async def test_the_status_tool_called_after_a_refused_repeat_lets_the_next_one_through(
    gateway: RunningGateway, stub: Any
) -> None:
    first = await refund(stub)
    refused = await refund(stub)
    assert refused.decision == pb.DECISION_REJECT
    status = await stub.Validate(request("get_refund_status", {"order_id": "ord_1"}, conversation="conv-1"), timeout=5)
    assert status.decision == pb.DECISION_ALLOW and not status.idempotency_key  # no side effect: no key

    # Only in the conversation that checked.
    elsewhere = await refund(stub, conversation="conv-2")
    assert not elsewhere.HasField("repeat_of")
    assert (await refund(stub, conversation="conv-2")).decision == pb.DECISION_REJECT

    retry = await refund(stub)
    assert retry.decision == pb.DECISION_ALLOW and retry.repeat_of.retry_allowed
    assert retry.repeat_of.call_id == first.call_id
    assert (
        value(gateway.registry, "argwatch_repeat_retries_total", tool="refund_order", reason="after_status_check") == 1
    )


async def test_in_observe_mode_a_repeat_is_let_through_counted_and_said(gateway: RunningGateway, stub: Any) -> None:
    arguments = {"customer": "c_9", "amount_cents": 500}
    first = await stub.Validate(request("issue_credit", arguments, conversation="c"), timeout=5)
    again = await stub.Validate(request("issue_credit", arguments, conversation="c"), timeout=5)
    assert first.decision == again.decision == pb.DECISION_ALLOW
    assert again.mode == pb.MODE_OBSERVE
    assert [p.code for p in again.problems] == [pb.PROBLEM_CODE_REPEATED_CALL]
    assert again.repeat_of.call_id == first.call_id and not again.repeat_of.status_tool
    assert value(gateway.registry, "tool_call_repeat_total", tool="issue_credit") == 1
    # side_effect: true identifies the operation by every argument.
    other = await stub.Validate(request("issue_credit", {**arguments, "memo": "x"}, conversation="c"), timeout=5)
    assert other.idempotency_key != first.idempotency_key
    # The repeat ran (observe mode), so its outcome may be reported.
    assert (await report(stub, again.call_id, pb.OUTCOME_UNKNOWN, "c")).outcome == pb.OUTCOME_UNKNOWN


async def test_report_outcome_refuses_what_it_cannot_record(gateway: RunningGateway, stub: Any) -> None:
    first = await refund(stub)
    refused = await refund(stub)
    status = await stub.Validate(request("get_refund_status", {"order_id": "ord_1"}), timeout=5)
    bad_arguments = await refund(stub, {"order_id": "ord_2"})  # amount missing: refused for its arguments
    assert bad_arguments.decision == pb.DECISION_REJECT and not bad_arguments.idempotency_key
    for call_id in ("never-seen", refused.call_id, status.call_id, bad_arguments.call_id):
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await report(stub, call_id, pb.OUTCOME_FAILED)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as unspecified:
        await report(stub, first.call_id, pb.OUTCOME_UNSPECIFIED)
    assert unspecified.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert value(gateway.registry, "argwatch_outcome_reports_total", tool="refund_order", outcome="failed") == 0


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


async def replicas_on(redis: RedisProcess, folder: Path, count: int = 2) -> list[RunningGateway]:
    policy = write_policy(folder)
    return [
        await build_gateway(
            loopback_settings(policy.path),
            policy=policy,
            registry=CollectorRegistry(),
            cache=SharedCache(redis_from_url(redis.url), GatewayMetrics(CollectorRegistry())),
        )
        for _ in range(count)
    ]


async def test_two_replicas_sharing_redis_catch_a_repeat_across_them(tmp_path: Path, redis: RedisProcess) -> None:
    replica_a, replica_b = await replicas_on(redis, tmp_path)
    try:
        channel_a, stub_a = gateway_stub(replica_a)
        channel_b, stub_b = gateway_stub(replica_b)
        async with channel_a, channel_b:
            first = await refund(stub_a)
            again = await refund(stub_b)  # the agent's retry landed on the other replica
            assert again.decision == pb.DECISION_REJECT and again.repeat_of.call_id == first.call_id
            assert again.idempotency_key == first.idempotency_key
            assert again.repeat_check == pb.REPEAT_CHECK_SHARED
            repair = await stub_a.Repair(pb.RepairRequest(call_id=again.call_id, conversation_id="conv-1"), timeout=5)
            assert first.call_id in repair.message

            # The outcome reported on B reaches A: A lets the genuine retry through.
            await report(stub_b, first.call_id, pb.OUTCOME_FAILED)
            retry = await refund(stub_a)
            assert retry.decision == pb.DECISION_ALLOW and retry.repeat_of.retry_allowed
        # The window is the key's lifetime in Redis (10 minutes in the policy).
        client = Redis(port=redis.port)
        try:
            (stored,) = [key async for key in client.scan_iter(match="*operation:aw1_*")]
            assert 590_000 < await client.pttl(stored) <= 600_000
        finally:
            await client.aclose()
    finally:
        await replica_a.stop(0)
        await replica_b.stop(0)


async def test_redis_down_fails_open_said_and_counted_and_this_replica_still_remembers(
    tmp_path: Path, redis: RedisProcess
) -> None:
    replica_a, replica_b = await replicas_on(redis, tmp_path)
    try:
        channel_a, stub_a = gateway_stub(replica_a)
        channel_b, stub_b = gateway_stub(replica_b)
        async with channel_a, channel_b:
            first = await refund(stub_a)
            redis.kill()
            on_a = await refund(stub_a)  # A's own memory still has the first call
            on_b = await refund(stub_b)  # B never saw it: not caught, and it says so
        assert on_a.decision == pb.DECISION_REJECT and on_a.repeat_of.call_id == first.call_id
        assert on_b.decision == pb.DECISION_ALLOW and not on_b.HasField("repeat_of")
        assert on_b.repeat_check == pb.REPEAT_CHECK_LOCAL_ONLY
        assert on_b.idempotency_key == first.idempotency_key  # still minted: the key needs no shared state
        assert value(replica_b.registry, "argwatch_repeat_check_degraded_total", tool="refund_order") == 1
    finally:
        await replica_a.stop(0)
        await replica_b.stop(0)


async def test_validate_stream_catches_a_repeat_on_the_same_stream(stub: Any) -> None:
    async def requests() -> AsyncIterator[pb.ValidateRequest]:
        for call_id in ("s1", "s2"):
            yield request("refund_order", REFUND, conversation="stream", call_id=call_id)

    answers = {answer.call_id: answer async for answer in stub.ValidateStream(requests(), timeout=10)}
    assert answers["s1"].decision == pb.DECISION_ALLOW and answers["s1"].idempotency_key
    assert answers["s2"].decision == pb.DECISION_REJECT and answers["s2"].repeat_of.call_id == "s1"
    assert answers["s2"].idempotency_key == answers["s1"].idempotency_key
