"""The gateway over real gRPC: verdicts in observe and reject, Repair, fail-open, metrics and malformed input."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import struct_pb2

from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import REASON_CODES, GatewayFactory, SourceServer
from tests.service.helpers import eventually, gateway_stub, request, series_count, value


@pytest.fixture
async def observe_gateway(gateway_factory: GatewayFactory):
    return await gateway_factory(refund_mode="observe")


@pytest.fixture
async def reject_gateway(gateway_factory: GatewayFactory):
    return await gateway_factory(refund_mode="reject")


async def validate(gateway, message: pb.ValidateRequest) -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(message, timeout=5)
        return response


async def test_observe_mode_allows_an_invented_value_lists_the_problem_and_counts_it(observe_gateway) -> None:
    response = await validate(observe_gateway, request("refund_order", {"reason_code": "OTHER"}, call_id="c1"))
    assert response.call_id == "c1"
    assert (response.decision, response.mode) == (pb.DECISION_ALLOW, pb.MODE_OBSERVE)
    (problem,) = response.problems
    assert (problem.code, problem.shape, problem.argument) == (
        pb.PROBLEM_CODE_OUT_OF_SET,
        pb.SHAPE_INVENTED,
        "reason_code",
    )
    assert [(v.name, v.version) for v in response.value_sets] == [("refunds.reason_codes", 1)]
    registry = observe_gateway.registry
    assert (
        value(
            registry,
            "tool_argument_value_check_total",
            tool="refund_order",
            argument="reason_code",
            set="refunds.reason_codes",
            in_set="false",
            in_set_normalised="false",
        )
        == 1
    )
    assert value(registry, "argwatch_decisions_total", tool="refund_order", mode="observe", decision="allow") == 1
    assert (
        value(registry, "tool_argument_problems_total", tool="refund_order", argument="reason_code", code="out_of_set")
        == 1
    )
    assert value(registry, "tool_argument_repair_started_total", tool="refund_order") == 0


async def test_a_legal_value_is_allowed_with_no_problem(reject_gateway) -> None:
    response = await validate(reject_gateway, request("refund_order", {"reason_code": "WRONG_ITEM"}))
    assert response.decision == pb.DECISION_ALLOW
    assert list(response.problems) == []
    assert len(response.call_id) == 32  # minted by the gateway
    assert (
        value(
            reject_gateway.registry,
            "tool_argument_value_check_total",
            tool="refund_order",
            argument="reason_code",
            set="refunds.reason_codes",
            in_set="true",
            in_set_normalised="true",
        )
        == 1
    )


async def test_reject_mode_rejects_and_repair_lists_the_legal_set_sorted(reject_gateway) -> None:
    channel, stub = gateway_stub(reject_gateway)
    async with channel:
        response = await stub.Validate(request("refund_order", {"reason_code": "ITEM_DEFECTIVE"}), timeout=5)
        assert (response.decision, response.mode) == (pb.DECISION_REJECT, pb.MODE_REJECT)
        repair = await stub.Repair(pb.RepairRequest(call_id=response.call_id), timeout=5)
    assert value(reject_gateway.registry, "tool_argument_repair_started_total", tool="refund_order") == 1
    (legal,) = repair.legal_values
    assert list(legal.values) == sorted(REASON_CODES)
    assert (legal.total, legal.complete) == (len(REASON_CODES), True)
    assert repair.executed is False
    assert (repair.attempt, repair.give_up) == (1, False)
    assert "Nothing was executed" in repair.message
    assert '"ITEM_DEFECTIVE" is not a valid value' in repair.message
    assert '"DAMAGED_ITEM", "LATE_DELIVERY", "NOT_RECEIVED", "WRONG_ITEM"' in repair.message
    assert "If no code fits, ask the user." in repair.message


async def test_repair_of_a_large_set_offers_the_nearest_few_and_the_count(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    from argwatch.server.modes.store import GLOBAL
    from argwatch.server.policy.model import Mode

    gateway.modes.set_mode(GLOBAL, Mode.REJECT, actor="test", reason="enforce everything")
    channel, stub = gateway_stub(gateway)
    async with channel:
        response = await stub.Validate(request("create_ticket", {"assignee": "user0O42"}), timeout=5)
        assert response.decision == pb.DECISION_REJECT
        repair = await stub.Repair(pb.RepairRequest(call_id=response.call_id), timeout=5)
    (legal,) = repair.legal_values
    assert (legal.total, legal.complete, len(legal.values)) == (500, False, 3)
    assert legal.values[0] == "user0042"
    assert "The 3 closest of 500 valid values" in repair.message
    assert len(repair.message) < 1000


async def test_a_formatting_slip_counts_out_of_set_but_in_set_after_normalisation(observe_gateway) -> None:
    response = await validate(observe_gateway, request("refund_order", {"reason_code": "damaged-item"}))
    (problem,) = response.problems
    assert (problem.shape, problem.suggestion, problem.in_set_normalised) == (pb.SHAPE_SEPARATOR, "DAMAGED_ITEM", True)
    assert (
        value(
            observe_gateway.registry,
            "tool_argument_value_check_total",
            tool="refund_order",
            argument="reason_code",
            set="refunds.reason_codes",
            in_set="false",
            in_set_normalised="true",
        )
        == 1
    )


async def test_past_max_staleness_calls_are_allowed_and_counted_unavailable(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject", ttl="300ms", max_staleness="600ms")
    await source.stop()
    registry = gateway.registry

    async def failed_open() -> bool:
        response = await validate(gateway, request("refund_order", {"reason_code": "INVENTED"}))
        return len(response.skipped) == 1

    await eventually(failed_open)
    response = await validate(gateway, request("refund_order", {"reason_code": "INVENTED"}))
    assert response.decision == pb.DECISION_ALLOW  # reject mode, but the check could not run
    assert list(response.problems) == []
    (skipped,) = response.skipped
    assert (skipped.argument, skipped.value_set, skipped.reason) == (
        "reason_code",
        "refunds.reason_codes",
        pb.SKIP_REASON_SOURCE_UNAVAILABLE,
    )
    assert (
        value(registry, "tool_argument_check_unavailable_total", tool="refund_order", set="refunds.reason_codes") >= 2
    )
    assert value(registry, "argwatch_source_connected", source="owners") == 0
    assert value(registry, "argwatch_value_set_refresh_total", set="refunds.reason_codes", result="error") >= 1


async def test_past_max_staleness_with_failure_closed_rejects_with_a_problem(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject", ttl="300ms", max_staleness="600ms", failure="closed")
    await source.stop()

    async def failed_closed() -> bool:
        response = await validate(gateway, request("refund_order", {"reason_code": "DAMAGED_ITEM"}))
        return response.decision == pb.DECISION_REJECT

    await eventually(failed_closed)
    response = await validate(gateway, request("refund_order", {"reason_code": "DAMAGED_ITEM"}))
    assert [p.code for p in response.problems] == [pb.PROBLEM_CODE_CHECK_UNAVAILABLE]


async def test_a_thousand_invented_tool_names_add_no_metric_series(observe_gateway) -> None:
    channel, stub = gateway_stub(observe_gateway)
    async with channel:
        await stub.Validate(request("warmup_tool", {}), timeout=5)
        before = series_count(observe_gateway.registry)
        for i in range(1000):
            response = await stub.Validate(request(f"invented_tool_{i}", {"x": f"v{i}"}), timeout=5)
            assert [p.code for p in response.problems] == [pb.PROBLEM_CODE_UNKNOWN_TOOL]
    assert series_count(observe_gateway.registry) == before
    assert (
        value(observe_gateway.registry, "argwatch_decisions_total", tool="_unknown", mode="observe", decision="allow")
        == 1001
    )


async def test_malformed_json_arguments_are_a_problem_in_the_response(observe_gateway) -> None:
    for raw, reason in [
        (b'{"reason_code": "DAMAGED', "not valid JSON"),
        (b"[1, 2]", "expected a JSON object, got an array"),
        (b"\xff\xfe", "not valid JSON"),
        (b"NaN", "not valid JSON"),
    ]:
        response = await validate(observe_gateway, request("refund_order", raw=raw))
        assert response.decision == pb.DECISION_ALLOW
        (problem,) = response.problems
        assert problem.code == pb.PROBLEM_CODE_MALFORMED_ARGUMENTS
        assert reason in problem.message
    assert (
        value(
            observe_gateway.registry,
            "tool_argument_problems_total",
            tool="refund_order",
            argument="_call",
            code="malformed_arguments",
        )
        == 4
    )


async def test_malformed_json_in_reject_mode_is_rejected_and_repairable(reject_gateway) -> None:
    channel, stub = gateway_stub(reject_gateway)
    async with channel:
        response = await stub.Validate(request("refund_order", raw=b"{not json"), timeout=5)
        assert response.decision == pb.DECISION_REJECT
        repair = await stub.Repair(pb.RepairRequest(call_id=response.call_id), timeout=5)
    assert "not a JSON object" in repair.message


async def test_struct_arguments_are_checked_like_json(observe_gateway) -> None:
    args = struct_pb2.Struct()
    args.update({"reason_code": "NOT_RECEIVED", "amount_cents": 120})
    response = await validate(observe_gateway, pb.ValidateRequest(tool="refund_order", arguments_struct=args))
    assert list(response.problems) == []
    args.update({"reason_code": 120})
    response = await validate(observe_gateway, pb.ValidateRequest(tool="refund_order", arguments_struct=args))
    assert [p.code for p in response.problems] == [pb.PROBLEM_CODE_WRONG_TYPE]


async def test_validate_stream_answers_every_request_matched_by_call_id(observe_gateway) -> None:
    async def requests() -> AsyncIterator[pb.ValidateRequest]:
        for i in range(50):
            code = REASON_CODES[i % 4] if i % 5 else "MADE_UP"
            yield request("refund_order", {"reason_code": code}, call_id=f"s{i}")

    channel, stub = gateway_stub(observe_gateway)
    async with channel:
        responses = [r async for r in stub.ValidateStream(requests(), timeout=10)]
    assert sorted(r.call_id for r in responses) == sorted(f"s{i}" for i in range(50))
    with_problems = {r.call_id for r in responses if r.problems}
    assert with_problems == {f"s{i}" for i in range(0, 50, 5)}


async def test_repeating_the_same_invalid_call_tells_the_model_to_give_up(reject_gateway) -> None:
    channel, stub = gateway_stub(reject_gateway)
    async with channel:
        first = await stub.Validate(request("refund_order", {"reason_code": "X"}, conversation="conv"), timeout=5)
        second = await stub.Validate(request("refund_order", {"reason_code": "Y"}, conversation="conv"), timeout=5)
        same = await stub.Validate(request("refund_order", {"reason_code": "Y"}, conversation="conv"), timeout=5)
        repairs = [
            await stub.Repair(pb.RepairRequest(call_id=r.call_id, conversation_id="conv"), timeout=5)
            for r in (first, second, same)
        ]
    assert [(r.attempt, r.give_up) for r in repairs] == [(1, False), (2, False), (3, True)]
    assert "Do not call refund_order again" in repairs[2].message


async def test_repair_of_an_unknown_call_id_is_not_found(reject_gateway) -> None:
    channel, stub = gateway_stub(reject_gateway)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Repair(pb.RepairRequest(call_id="never-seen"), timeout=5)
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Repair(pb.RepairRequest(), timeout=5)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_the_global_override_wins_over_the_tools_mode(reject_gateway) -> None:
    from argwatch.server.modes.store import GLOBAL
    from argwatch.server.policy.model import Mode

    reject_gateway.modes.set_mode(GLOBAL, Mode.OBSERVE, actor="test", reason="incident: observe only")
    response = await validate(reject_gateway, request("refund_order", {"reason_code": "X"}))
    assert (response.decision, response.mode) == (pb.DECISION_ALLOW, pb.MODE_OBSERVE)
    assert value(reject_gateway.registry, "argwatch_mode", tool="refund_order") == 0


async def test_file_source_sets_are_checked_with_retired_values(observe_gateway) -> None:
    response = await validate(observe_gateway, request("transfer_stock", {"warehouse_code": "LHR-1"}))
    assert [(p.shape, p.value_set) for p in response.problems] == [(pb.SHAPE_RETIRED, "wms.warehouses")]
    assert [(v.name, v.version) for v in response.value_sets] == [("wms.warehouses", 3)]


async def test_bytes_that_are_not_a_validate_request_get_invalid_argument_and_the_server_serves_on(
    observe_gateway,
) -> None:
    garbage = b"\x0a\xff\xff\xff\xff\x0f"  # field 1 (tool) claiming a length far past the end
    async with grpc.aio.insecure_channel(observe_gateway.target) as channel:
        validate_raw: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/argwatch.v1.Gateway/Validate"
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await validate_raw(garbage, timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a ValidateRequest" in (refused.value.details() or "")
        stream: grpc.aio.StreamStreamCall[bytes, bytes] = channel.stream_stream("/argwatch.v1.Gateway/ValidateStream")(
            timeout=5
        )
        await stream.write(request("refund_order", {"reason_code": REASON_CODES[0]}).SerializeToString())
        reply = await stream.read()
        assert isinstance(reply, bytes) and pb.ValidateResponse.FromString(reply).decision == pb.DECISION_ALLOW
        await stream.write(garbage)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await stream.read()
        assert ended.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    response = await validate(observe_gateway, request("refund_order", {"reason_code": REASON_CODES[0]}))
    assert response.decision == pb.DECISION_ALLOW
