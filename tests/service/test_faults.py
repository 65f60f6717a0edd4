"""Faults: sources that hang, answer slowly or stream garbage. Start on time, calls stay quick, all counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import sources_pb2
from tests.conftest import RECORDS_POLICY, gateway_on, write_sets_file
from tests.service.helpers import eventually, gateway_stub, request, serve_raw, value
from tests.service.scripted_source import ScriptedSource
from tests.service.scripted_source import serve as serve_scripted


class HangingSource:
    """A real gRPC server at the ValueSetSource's address that accepts every call and never answers."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()

    async def hang(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.calls += 1
        await self.release.wait()
        return b""

    async def hang_stream(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        self.calls += 1
        await self.release.wait()
        if False:  # a stream that never sends
            yield b""


@pytest.fixture
async def hanging() -> AsyncIterator[tuple[HangingSource, str]]:
    source = HangingSource()
    handlers: dict[str, grpc.RpcMethodHandler] = {
        "GetValueSet": grpc.unary_unary_rpc_method_handler(source.hang),
        "WatchValueSets": grpc.unary_stream_rpc_method_handler(source.hang_stream),
    }
    server, target = await serve_raw("argwatch.v1.ValueSetSource", handlers)
    yield source, target
    source.release.set()
    await server.stop(0)


async def test_a_hanging_source_delays_neither_the_start_nor_the_calls(
    tmp_path: Path, hanging: tuple[HangingSource, str]
) -> None:
    source, target = hanging
    sets = write_sets_file(str(tmp_path))
    text = f"""
        sources:
          owners: {{grpc: {{target: "{target}", timeout: 300ms}}}}
          local: {{file: {sets}}}
        value_sets:
          refunds.reason_codes: {{source: owners, failure: open}}
          wms.warehouses: {{source: local}}
        tools:
          refund_order: {{mode: reject, arguments: {{reason_code: {{value_set: refunds.reason_codes}}}}}}
          transfer_stock: {{mode: reject, arguments: {{warehouse_code: {{value_set: wms.warehouses}}}}}}
    """
    # Returns after the 1 s start-up timeout; were it waiting on the hang, the test's own timeout would end it.
    gateway = await gateway_on(tmp_path, text, startup_timeout_seconds=1.0)
    try:
        assert source.calls >= 1  # it was asked
        channel, stub = gateway_stub(gateway)
        async with channel:
            for _ in range(20):
                hung = await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=2)
                assert hung.decision  # a verdict, at once: the check failed open
                assert [(s.argument, s.value_set) for s in hung.skipped] == [("reason_code", "refunds.reason_codes")]
                served = await stub.Validate(request("transfer_stock", {"warehouse_code": "NOPE"}), timeout=2)
                assert [p.argument for p in served.problems] == ["warehouse_code"]  # other sets work as usual
        registry = gateway.registry
        assert (
            value(registry, "tool_argument_check_unavailable_total", tool="refund_order", set="refunds.reason_codes")
            == 20
        )
        assert value(registry, "argwatch_source_connected", source="owners") == 0
        assert value(registry, "argwatch_value_set_available", set="refunds.reason_codes") == 0
    finally:
        await gateway.stop(0)


class HangingRecords:
    """A real RecordSource that never answers, noting when a look-up it holds is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.never = asyncio.Event()  # never set: the look-up waits until it is cancelled

    async def lookup(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.started.set()
        try:
            await self.never.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return b""


@pytest.fixture
async def records_gateway(tmp_path: Path) -> AsyncIterator[tuple[HangingRecords, object]]:
    records = HangingRecords()
    server, target = await serve_raw(
        "argwatch.v1.RecordSource", {"Lookup": grpc.unary_unary_rpc_method_handler(records.lookup)}
    )
    gateway = await gateway_on(tmp_path, RECORDS_POLICY.format(target=target))
    yield records, gateway
    await gateway.stop(0)
    await server.stop(0)


async def test_a_hanging_look_up_still_answers_within_the_callers_deadline(records_gateway) -> None:
    _records, gateway = records_gateway
    channel, stub = gateway_stub(gateway)
    async with channel:
        # The source's own timeout is 30 s; the caller gives 1 s. The look-up gets less than that,
        # so the caller receives a verdict (the check could not run, and fails closed), not DEADLINE_EXCEEDED.
        response = await stub.Validate(request("refund_order", {"order_id": "ord_1"}), timeout=1.0)
    assert [p.argument for p in response.problems] == ["order_id"]
    assert "could not be checked" in response.problems[0].message


async def test_a_caller_that_cancels_cancels_the_look_up(records_gateway) -> None:
    records, gateway = records_gateway
    channel, stub = gateway_stub(gateway)
    async with channel:
        call = stub.Validate(request("refund_order", {"order_id": "ord_2"}), timeout=30)
        await asyncio.wait_for(records.started.wait(), timeout=10)
        call.cancel()
        await asyncio.wait_for(records.cancelled.wait(), timeout=10)  # the work stopped at the source too


async def test_a_source_that_streams_garbage_is_a_source_down_counted_while_calls_go_on(tmp_path: Path) -> None:
    """Bytes that are not a WatchValueSetsResponse: the stream fails to parse, the source is counted down."""

    async def garbage(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"\xff\xff\xff\xff not a protobuf message"

    async def garbage_unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"\xff\xff\xff\xff not a protobuf message"

    handlers: dict[str, grpc.RpcMethodHandler] = {
        "GetValueSet": grpc.unary_unary_rpc_method_handler(garbage_unary),
        "WatchValueSets": grpc.unary_stream_rpc_method_handler(garbage),
    }
    server, target = await serve_raw("argwatch.v1.ValueSetSource", handlers)
    text = f"""
        sources:
          owners: {{grpc: {{target: "{target}", timeout: 300ms}}}}
        value_sets:
          refunds.reason_codes: {{source: owners, failure: open}}
        tools:
          refund_order: {{mode: reject, arguments: {{reason_code: {{value_set: refunds.reason_codes}}}}}}
    """
    gateway = await gateway_on(tmp_path, text, startup_timeout_seconds=1.0)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            response = await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=2)
        assert [s.value_set for s in response.skipped] == ["refunds.reason_codes"]  # failed open, said so
        registry = gateway.registry
        assert value(registry, "argwatch_source_connected", source="owners") == 0
        assert value(registry, "argwatch_value_set_refresh_total", set="refunds.reason_codes", result="error") >= 1
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_a_slow_source_keeps_the_last_good_copy_marks_it_stale_and_never_slows_a_call(tmp_path: Path) -> None:
    """A pulled source that starts answering after its timeout: each pull is cut off and counted, the
    copy in use ages into stale and says so, and no call waits on the source."""
    scripted = ScriptedSource(
        {"refunds.reason_codes": sources_pb2.ValueSet(name="refunds.reason_codes", version=1, members=["DAMAGED"])},
        can_watch=False,
    )
    server, target = await serve_scripted(scripted)
    text = f"""
        sources:
          owners: {{grpc: {{target: "{target}", timeout: 1s}}}}
        value_sets:
          refunds.reason_codes: {{source: owners, ttl: 600ms, failure: open}}
        tools:
          refund_order: {{mode: reject, arguments: {{reason_code: {{value_set: refunds.reason_codes}}}}}}
    """
    gateway = await gateway_on(tmp_path, text)
    registry = gateway.registry
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            fresh = await stub.Validate(request("refund_order", {"reason_code": "NOPE"}), timeout=2)
            assert fresh.decision == pb.DECISION_REJECT and not fresh.value_sets[0].stale

            scripted.answer_delay = 30.0  # from now on each pull outlasts the source's 1 s timeout

            async def aged_into_stale() -> bool:
                # 0.5 s per call: half the source's timeout, so a call that waited on a pull would fail here.
                response = await stub.Validate(request("refund_order", {"reason_code": "NOPE"}), timeout=0.5)
                assert response.decision == pb.DECISION_REJECT  # still checked, against the last good copy
                return response.value_sets[0].stale and (
                    value(registry, "argwatch_value_set_refresh_total", set="refunds.reason_codes", result="error") >= 1
                )

            await eventually(aged_into_stale, seconds=20)
            assert scripted.slow_answers >= 1
            assert value(registry, "argwatch_source_connected", source="owners") == 0
            assert value(registry, "argwatch_value_set_stale", set="refunds.reason_codes") == 1

            scripted.fast_again.set()  # the source recovers: the next pull confirms the copy

            async def fresh_again() -> bool:
                response = await stub.Validate(request("refund_order", {"reason_code": "NOPE"}), timeout=0.5)
                return not response.value_sets[0].stale

            await eventually(fresh_again, seconds=20)
            assert value(registry, "argwatch_source_connected", source="owners") == 1
    finally:
        await gateway.stop(0)
        await server.stop(0)
