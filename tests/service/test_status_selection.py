"""GetStatus and WatchStatus with a selection: the tools it matches, in its order, a page of them, their own rows."""

from __future__ import annotations

import grpc
import pytest

from argwatch.server.edge.admin_service import KEPT_SELECTIONS
from argwatch.v1 import admin_pb2
from tests.conftest import GatewayFactory
from tests.service.helpers import admin_stub, gateway_stub, request

POLICY_ORDER = ["refund_order", "create_ticket", "transfer_stock", "_unknown"]


def selected(**fields: object) -> admin_pb2.GetStatusRequest:
    return admin_pb2.GetStatusRequest(selection=admin_pb2.StatusSelection(**fields))  # type: ignore[arg-type]


def tool_names(status: admin_pb2.GetStatusResponse) -> list[str]:
    return [tool.tool for tool in status.tools]


def figures_of(status: admin_pb2.GetStatusResponse, tool: str) -> list[tuple[object, ...]]:
    """A tool's counts and its argument rows' as the snapshot gives them (not when they were taken)."""
    row = next(t for t in status.tools if t.tool == tool)
    rows: list[tuple[object, ...]] = [
        (w.window_seconds, w.calls, w.rejected, w.value_checks, w.out_of_set, dict(w.problems)) for w in row.windows
    ]
    rows.append(tuple(row.calls_per_minute))
    for argument in status.arguments:
        if argument.tool == tool:
            rows.append(
                (
                    argument.argument,
                    argument.value_set,
                    tuple((w.value_checks, w.out_of_set) for w in argument.windows),
                    tuple(argument.checks_per_minute),
                )
            )
    return rows


async def test_a_selection_carries_the_tools_it_matches_and_only_their_rows(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        for reason in ("DAMAGED_ITEM", "MADE_UP", "damaged_item"):
            await stub.Validate(request("refund_order", {"reason_code": reason}), timeout=5)
        await stub.Validate(request("transfer_stock", {"warehouse_code": "NOWHERE"}), timeout=5)
        whole = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        by_name = await admin.GetStatus(selected(contains="STOCK"), timeout=5)
        by_argument = await admin.GetStatus(selected(contains="reason_c"), timeout=5)
        nothing = await admin.GetStatus(selected(contains="no such tool"), timeout=5)

    assert tool_names(whole) == POLICY_ORDER and whole.tools_total == whole.tools_matched == 4
    assert tool_names(by_name) == ["transfer_stock"]
    assert (by_name.tools_total, by_name.tools_matched) == (4, 1)
    assert {argument.tool for argument in by_name.arguments} == {"transfer_stock"}
    assert tool_names(by_argument) == ["refund_order"]  # matched by its argument's name
    # What a selection carries of a tool is what the whole snapshot says of it.
    assert figures_of(by_name, "transfer_stock") == figures_of(whole, "transfer_stock")
    assert figures_of(by_argument, "refund_order") == figures_of(whole, "refund_order")
    assert (tool_names(nothing), nothing.tools_matched, list(nothing.arguments)) == ([], 0, [])
    assert [s.name for s in nothing.value_sets] == [s.name for s in whole.value_sets]  # the sets come whole


async def test_pages_of_tools_cover_every_tool_once_in_policy_order(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        pages = [
            await admin.GetStatus(selected(skip_tools=skip, max_tools=2, order=admin_pb2.TOOL_ORDER_POLICY), timeout=5)
            for skip in (0, 2, 4)
        ]
    assert [tool_names(page) for page in pages] == [POLICY_ORDER[:2], POLICY_ORDER[2:], []]
    assert {page.tools_matched for page in pages} == {4}


async def test_attention_puts_the_tool_with_invented_values_first(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        for _ in range(30):  # busier, and clean
            await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=5)
        for i in range(20):  # the policy's attention: over 3% out of set, over at least 20 checks
            await stub.Validate(request("transfer_stock", {"warehouse_code": f"NOWHERE-{i}"}), timeout=5)
        await stub.Validate(request("no_such_tool", {}), timeout=5)
        attention = await admin.GetStatus(selected(order=admin_pb2.TOOL_ORDER_ATTENTION), timeout=5)
        top = await admin.GetStatus(selected(order=admin_pb2.TOOL_ORDER_ATTENTION, max_tools=1), timeout=5)
        first_in_policy = await admin.GetStatus(selected(max_tools=1), timeout=5)
    # The calls naming a tool the policy lacks rank by their traffic, as a tool's do.
    assert tool_names(attention) == ["transfer_stock", "refund_order", "_unknown", "create_ticket"]
    assert attention.tools_total == 4
    assert tool_names(top) == ["transfer_stock"]
    assert tool_names(first_in_policy) == ["refund_order"]


async def test_a_watcher_gets_its_own_selection(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        narrow = admin.WatchStatus(
            admin_pb2.WatchStatusRequest(interval_seconds=0.2, selection=admin_pb2.StatusSelection(contains="ticket")),
            timeout=10,
        )
        every = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=0.2), timeout=10)
        for _ in range(2):  # and again: a snapshot shared between watchers is shared by selection
            assert tool_names(await narrow.read()) == ["create_ticket"]
            assert tool_names(await every.read()) == POLICY_ORDER
        narrow.cancel()
        every.cancel()


async def test_a_selection_too_long_is_refused(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.GetStatus(selected(contains="x" * 201), timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "at most 200" in (refused.value.details() or "")
        stream = admin.WatchStatus(
            admin_pb2.WatchStatusRequest(selection=admin_pb2.StatusSelection(contains="x" * 201)), timeout=5
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused_watch:
            await stream.read()
        assert refused_watch.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_the_snapshots_kept_for_watchers_are_bounded_whatever_they_ask(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        for skip in range(KEPT_SELECTIONS + 8):  # each a selection of its own
            stream = admin.WatchStatus(
                admin_pb2.WatchStatusRequest(selection=admin_pb2.StatusSelection(skip_tools=skip)), timeout=10
            )
            assert isinstance(await stream.read(), admin_pb2.GetStatusResponse)
            stream.cancel()
    kept = gateway.admin
    assert len(kept._last_status) == KEPT_SELECTIONS
    assert len(kept._build_seconds) <= KEPT_SELECTIONS and len(kept._served_at) <= KEPT_SELECTIONS
