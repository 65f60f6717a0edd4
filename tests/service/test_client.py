"""argwatch.client against a real gateway: go ahead, or the repair message for the model; async and blocking."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from argwatch.client import (
    ArgwatchError,
    Gateway,
    GatewayRejectedRequest,
    GatewayUnavailable,
    InvalidInput,
    Session,
    SyncGateway,
    from_anthropic,
    from_openai,
)
from tests.conftest import GatewayFactory
from tests.service.helpers import serve_raw


def openai_call(reason_code: str, call_id: str) -> dict[str, object]:
    arguments = json.dumps({"reason_code": reason_code})
    return {"id": call_id, "type": "function", "function": {"name": "refund_order", "arguments": arguments}}


async def test_a_legal_call_goes_ahead_and_an_invented_value_gets_the_repair_message(
    gateway_factory: GatewayFactory,
) -> None:
    running = await gateway_factory(refund_mode="reject")
    async with Gateway(running.target) as gateway:
        clean = await gateway.check(from_openai(openai_call("DAMAGED_ITEM", "call_1")), Session("conv-1"))
        assert clean.go_ahead and clean.tool_error == ""
        call = from_anthropic(
            {"type": "tool_use", "id": "toolu_1", "name": "refund_order", "input": {"reason_code": "ITEM_DEFECTIVE"}}
        )
        refused = await gateway.check(call, Session("conv-1"))
    assert not refused.go_ahead
    assert refused.call_id == "toolu_1"  # the provider's id is the call id the gateway knows it by
    assert "ITEM_DEFECTIVE" in refused.tool_error and "DAMAGED_ITEM" in refused.tool_error
    answer = call.tool_error(refused.tool_error)
    assert answer["tool_use_id"] == "toolu_1" and answer["is_error"] is True


async def test_the_blocking_client_answers_the_same(gateway_factory: GatewayFactory) -> None:
    running = await gateway_factory(refund_mode="reject")

    def check(reason_code: str) -> tuple[bool, str]:
        with SyncGateway(running.target) as gateway:
            outcome = gateway.check(from_openai(openai_call(reason_code, f"call_{reason_code}")))
            return outcome.go_ahead, outcome.tool_error

    # The gateway runs on this test's event loop: the blocking client runs in a thread.
    assert await asyncio.to_thread(check, "DAMAGED_ITEM") == (True, "")
    go_ahead, message = await asyncio.to_thread(check, "NOT_A_CODE")
    assert not go_ahead and "NOT_A_CODE" in message


@pytest.fixture
async def silent_gateway() -> AsyncIterator[str]:
    """A real gRPC server whose Validate never answers in time."""

    never = asyncio.Event()

    async def validate(body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await never.wait()  # released only when the test is over
        return b""

    server, target = await serve_raw("argwatch.v1.Gateway", {"Validate": grpc.unary_unary_rpc_method_handler(validate)})
    yield target
    never.set()
    await server.stop(0)


async def test_every_check_has_a_deadline_and_no_verdict_is_gateway_unavailable(silent_gateway: str) -> None:
    """Past its deadline a check raises GatewayUnavailable (an ArgwatchError and a RuntimeError), the gRPC
    error as its cause, and a message that names the tool and no address."""
    started = time.monotonic()
    async with Gateway(silent_gateway, timeout=0.5) as gateway:
        with pytest.raises(GatewayUnavailable) as failed:
            await gateway.check(from_openai(openai_call("DAMAGED_ITEM", "call_1")))
    assert failed.value.code == "DEADLINE_EXCEEDED"
    assert isinstance(failed.value, ArgwatchError) and isinstance(failed.value, RuntimeError)
    assert isinstance(failed.value.__cause__, grpc.aio.AioRpcError)
    assert "refund_order was not run" in str(failed.value) and "127.0.0.1" not in str(failed.value)
    assert time.monotonic() - started < 3.0


async def test_an_unreachable_gateway_is_unavailable_for_the_blocking_client_too() -> None:
    """SyncGateway raises the same tree: a port nobody listens on gives GatewayUnavailable, not a gRPC error."""
    with socket.socket() as probe:  # a port bound, then let go: nobody listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def check() -> None:
        with SyncGateway(f"127.0.0.1:{port}", timeout=0.5) as gateway:
            gateway.check(from_openai(openai_call("DAMAGED_ITEM", "call_1")))

    with pytest.raises(GatewayUnavailable) as failed:
        await asyncio.to_thread(check)
    assert failed.value.code in {"UNAVAILABLE", "DEADLINE_EXCEEDED"}


async def test_the_client_hands_over_the_key_refuses_a_repeat_and_reports_outcomes(tmp_path) -> None:
    from tests.conftest import gateway_on
    from tests.service.test_side_effects import POLICY

    running = await gateway_on(tmp_path, POLICY)

    def refund(call_id: str) -> dict[str, object]:
        arguments = json.dumps({"order_id": "ord_1", "amount_cents": 1200})
        return {"id": call_id, "type": "function", "function": {"name": "refund_order", "arguments": arguments}}

    try:
        async with Gateway(running.target) as gateway:
            first = await gateway.check(from_openai(refund("call_1")), Session(conversation_id="c"))
            assert first.go_ahead and first.idempotency_key.startswith("aw1_")
            again = await gateway.check(from_openai(refund("call_2")), Session(conversation_id="c"))
            assert not again.go_ahead and "call get_refund_status first" in again.tool_error
            assert [problem.code for problem in again.problems] == ["REPEATED_CALL"]
            assert again.idempotency_key == first.idempotency_key
            with pytest.raises(GatewayRejectedRequest) as elsewhere:  # the id alone names no call in conversation "c"
                await gateway.report_outcome("call_1", "failed")
            assert elsewhere.value.code == "NOT_FOUND"
            reported = await gateway.report_outcome(first, "failed")  # the outcome knows where it was checked
            assert reported.idempotency_key == first.idempotency_key
            with pytest.raises(InvalidInput, match="outcome must be one of succeeded, failed, unknown"):
                await gateway.report_outcome(first, "timeout")  # type: ignore[arg-type]  # what mypy would refuse

        def blocking_retry() -> tuple[bool, str]:
            in_c = Session(conversation_id="c")
            with SyncGateway(running.target) as gateway:
                retry = gateway.check(from_openai(refund("call_3")), in_c)
                gateway.report_outcome("call_3", "succeeded", in_c)  # an id, and where it was made
                return retry.go_ahead, gateway.check(from_openai(refund("call_4")), in_c).tool_error

        go_ahead, after_success = await asyncio.to_thread(blocking_retry)
        assert go_ahead  # a retry after the reported failure
        assert "It succeeded" in after_success
    finally:
        await running.stop(0)
