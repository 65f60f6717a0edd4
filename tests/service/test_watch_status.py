"""Admin.WatchStatus and the windows in GetStatus: the figures match the traffic sent, per tool and argument."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.edge.status_selection import EVERY_TOOL
from argwatch.server.process.app import build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, loopback_settings, make_policy
from tests.service.helpers import admin_stub, eventually, gateway_stub, request


def window(row: admin_pb2.ToolStatus | admin_pb2.ArgumentStatus, seconds: int) -> admin_pb2.WindowFigures:
    return next(w for w in row.windows if w.window_seconds == seconds)


def argument_row(status: admin_pb2.GetStatusResponse, tool: str, argument: str) -> admin_pb2.ArgumentStatus:
    return next(a for a in status.arguments if (a.tool, a.argument) == (tool, argument))


async def test_the_status_windows_count_the_calls_sent(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        for i in range(20):
            await stub.Validate(
                request("refund_order", {"reason_code": "DAMAGED_ITEM"}, conversation=f"c{i}"), timeout=5
            )
        for i in range(6):
            await stub.Validate(
                request("refund_order", {"reason_code": "damaged_item"}, conversation=f"s{i}"), timeout=5
            )
        for i in range(4):
            await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}, conversation=f"m{i}"), timeout=5)
        # Two of the slips are repaired in their conversation.
        for i in range(2):
            await stub.Validate(
                request("refund_order", {"reason_code": "DAMAGED_ITEM"}, conversation=f"s{i}"), timeout=5
            )
        await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)

    refund = next(t for t in status.tools if t.tool == "refund_order")
    for seconds in (60, 900, 3600):
        figures = window(refund, seconds)
        assert (figures.calls, figures.rejected, figures.value_checks, figures.out_of_set) == (32, 10, 32, 10)
        assert (figures.repair_started, figures.repair_succeeded, figures.failed_open) == (10, 2, 0)
        assert dict(figures.problems) == {"out_of_set": 10}
        assert 0 < figures.covered_seconds <= seconds and figures.per_second == pytest.approx(
            32 / figures.covered_seconds
        )
    reason = argument_row(status, "refund_order", "reason_code")
    minute = window(reason, 60)
    assert reason.value_set == "refunds.reason_codes"
    assert (minute.value_checks, minute.out_of_set) == (32, 10)
    assert minute.out_of_set_rate == pytest.approx(10 / 32)
    # The six case slips are in the set after the default normalisation; the four inventions are not.
    assert minute.out_of_set_normalised == 4
    assert len(reason.checks_per_minute) == 60 and reason.checks_per_minute[-1] == 32
    assert sum(reason.out_of_set_per_minute) == 10
    stock = argument_row(status, "transfer_stock", "warehouse_code")
    assert (window(stock, 60).value_checks, window(stock, 60).out_of_set) == (1, 0)
    assert [(a.tool, a.argument) for a in status.arguments] == [
        ("refund_order", "reason_code"),
        ("create_ticket", "assignee"),
        ("transfer_stock", "warehouse_code"),
    ]


async def test_watch_status_streams_snapshots_that_follow_the_traffic(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        stream = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=0.2), timeout=10)
        first = await stream.read()
        assert isinstance(first, admin_pb2.GetStatusResponse)
        assert window(next(t for t in first.tools if t.tool == "refund_order"), 60).calls == 0
        for _ in range(5):
            await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
        seen = first
        while window(next(t for t in seen.tools if t.tool == "refund_order"), 60).calls < 5:
            snapshot = await stream.read()
            assert isinstance(snapshot, admin_pb2.GetStatusResponse)
            # Equal when a snapshot is shared again (its build's share of the loop is capped).
            assert snapshot.taken_at.ToNanoseconds() >= seen.taken_at.ToNanoseconds()
            seen = snapshot
        assert window(argument_row(seen, "refund_order", "reason_code"), 60).out_of_set == 5
        stream.cancel()


async def test_a_snapshot_slow_to_build_is_shared_longer_and_watchers_keep_getting_it(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        stream = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=0.2), timeout=10)
        first = await stream.read()
        assert isinstance(first, admin_pb2.GetStatusResponse)
        # As if that build had taken 100 ms: for the next 100 ms / STATUS_LOOP_SHARE (2 s) it is shared.
        gateway.admin._build_seconds[EVERY_TOOL] = 0.1
        started = asyncio.get_running_loop().time()
        shared = [await stream.read() for _ in range(4)]  # one every 0.2 s: the stream keeps its cadence
        assert asyncio.get_running_loop().time() - started < 1.9
        assert {s.taken_at.ToNanoseconds() for s in shared} == {first.taken_at.ToNanoseconds()}
        stream.cancel()


async def test_watch_status_refuses_a_too_short_interval(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        stream = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=0.01), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stream.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_checks_that_failed_open_show_in_the_argument_row(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject", ttl="300ms", max_staleness="600ms")
    await source.stop()
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:

        async def failed_open() -> bool:
            response = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
            return len(response.skipped) == 1 and response.decision == pb.DECISION_ALLOW

        await eventually(failed_open)
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    reason = window(argument_row(status, "refund_order", "reason_code"), 60)
    tool = window(next(t for t in status.tools if t.tool == "refund_order"), 60)
    assert reason.failed_open >= 1 and tool.failed_open == reason.failed_open
    value_set = next(s for s in status.value_sets if s.name == "refunds.reason_codes")
    assert not value_set.source_connected


async def test_a_watcher_does_not_hold_the_shutdown_for_the_grace_period(tmp_path, source: SourceServer) -> None:
    policy = make_policy(str(tmp_path), source.target)
    # A long grace: in-flight calls may take it, but a watching TUI is not in-flight work.
    settings = replace(loopback_settings(policy.path), grace_seconds=120.0)
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        stream = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=0.5))
        assert isinstance(await stream.read(), admin_pb2.GetStatusResponse)
        async with asyncio.timeout(30):  # far below the grace: the stream is ended, not waited for
            await gateway.stop()
            while (message := await stream.read()) is not grpc.aio.EOF:
                assert isinstance(message, admin_pb2.GetStatusResponse)
