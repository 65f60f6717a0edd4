"""Admin.PreviewChange: what a change would have done, over the last minute and 15 minutes, before it is made.

The issue's incident: the order look-up fails closed with its owner down, so
refund_order refuses every call. A preview of "fail open on orders_db" says
how many refused calls it would let through and why, that invented reasons
stay refused, and that ownership goes unchecked while the owner is down;
nothing is changed or audited by asking.
"""

from __future__ import annotations

import re
from typing import Any

import grpc
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.service import test_records_rules as records
from tests.service.helpers import admin_stub
from tests.service.test_records_rules import Start, call

start = records.start  # a real RecordSource, up or down, and a gateway on it

GOOD = {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100}
INVENTED = {"order_id": "ord_1", "reason_code": "ITEM_DEFECTIVE", "amount_cents": 100}


async def _preview(gateway: RunningGateway, **change: Any) -> admin_pb2.PreviewChangeResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.PreviewChangeResponse = await admin.PreviewChange(
            admin_pb2.PreviewChangeRequest(change=admin_pb2.SetModeRequest(**change)), timeout=5
        )
        return response


async def _traffic(gateway: RunningGateway, good: int, invented: int) -> None:
    for _ in range(good):
        await call(gateway, GOOD)
    for _ in range(invented):
        await call(gateway, INVENTED)


SO_FAR = re.compile(r" \(only \d+ s counted so far\)")  # the gateway started a moment ago


def _causes(counts: object) -> dict[str, int]:
    return {count.cause: count.calls for count in counts}  # type: ignore[attr-defined]


async def test_failing_open_on_the_down_source_previews_the_unverifiable_calls_and_keeps_invented_ones(
    start: Start,
) -> None:
    gateway = await start(failure="closed", source_up=False)
    await _traffic(gateway, good=30, invented=5)
    preview = await _preview(gateway, check="source:orders_db", failure="open", expires_in_seconds=600)
    minute, quarter = preview.windows
    assert (minute.window_seconds, quarter.window_seconds) == (60, 900)
    for window in (minute, quarter):
        assert (window.calls, window.refused_now, window.newly_allowed, window.newly_refused) == (35, 35, 30, 0)
        assert _causes(window.newly_allowed_by_cause) == {"unverifiable": 30}
    assert [(p.kind, p.security, p.tool, p.check) for p in preview.switched_off] == [
        ("ownership", True, "refund_order", "record:order")
    ]
    assert preview.changes_anything
    assert [SO_FAR.sub("", line) for line in preview.lines[:3]] == [
        "change: source:orders_db failure override: no override -> fails open while it cannot be read, for 10 min",
        "last 1 min: 35 calls to refund_order on this replica, refused or not; "
        "the modes in force now would have refused 35 of them",
        "  it would let through 30 of those 35 refused calls: 30 unverifiable (source down)",
    ]
    assert preview.lines[-2:] == [
        "it switches off (security first):",
        "  ownership (security): refund_order record:order would let calls through while orders_db is down "
        "(fails open): whether order ids exist and are the customer's own would go unchecked then, counted as "
        "skipped; enforced again the moment it answers",
    ]
    # Asking changed nothing and audited nothing.
    assert (await call(gateway, GOOD)).decision == pb.DECISION_REJECT
    channel, admin = admin_stub(gateway)
    async with channel:
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert list(trail.changes) == []


async def test_putting_the_whole_tool_in_observe_names_every_protection_it_switches_off_security_first(
    start: Start,
) -> None:
    gateway = await start(failure="closed", source_up=False)
    await _traffic(gateway, good=4, invented=2)
    preview = await _preview(gateway, tool="refund_order", mode=pb.MODE_OBSERVE)
    minute = preview.windows[0]
    assert (minute.calls, minute.refused_now, minute.newly_allowed) == (6, 6, 6)
    assert _causes(minute.newly_allowed_by_cause) == {"unverifiable": 6, "invented": 2}
    assert "  it would let through 6 of those 6 refused calls: 6 unverifiable (source down), 2 invented values " in (
        "\n".join(preview.lines) + " "
    ).replace("(a call with two causes counts under each)", "")
    assert [(p.kind, p.security, p.check) for p in preview.switched_off] == [
        ("ownership", True, "record:order"),
        ("check", False, "arg:reason_code"),
        ("check", False, "rule:not_above_paid"),
    ]
    assert preview.switched_off[0].text == (
        "refund_order record:order would no longer refuse another customer's order (ownership); order ids that "
        "do not exist; calls it cannot check while orders_db is down (fails closed)"
    )


async def test_clearing_an_observe_override_while_the_source_is_down_previews_the_calls_it_would_refuse(
    start: Start,
) -> None:
    """The issue: clearing it showed "reject would have refused 61.1%", an average over calm and outage."""
    gateway = await start(failure="closed", source_up=False)
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9"), timeout=5
        )
    await _traffic(gateway, good=8, invented=0)
    preview = await _preview(gateway, tool="refund_order", mode=pb.MODE_UNSPECIFIED)
    minute = preview.windows[0]
    assert (minute.calls, minute.refused_now, minute.newly_refused, minute.newly_allowed) == (8, 0, 8, 0)
    assert _causes(minute.newly_refused_by_cause) == {"unverifiable": 8}
    assert "  it would refuse 8 of the 8 calls let through now: 8 unverifiable (source down)" in preview.lines
    assert preview.lines[0] == (
        "change: refund_order, the whole tool: observe -> reject (override cleared: the policy's mode)"
    )
    assert preview.lines[-1] == "it switches off no check that refuses now"


async def test_a_change_set_mode_would_refuse_is_refused_with_the_same_reason(start: Start) -> None:
    gateway = await start()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _preview(gateway, tool="refund_order", check="record:invoice", mode=pb.MODE_OBSERVE)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "refund_order has no check 'record:invoice'" in (refused.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await _preview(gateway, check="source:orders_db", failure="ajar")
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_failing_closed_previews_the_calls_that_now_pass_skipped(start: Start) -> None:
    gateway = await start(failure="open", source_up=False)
    await _traffic(gateway, good=5, invented=1)
    preview = await _preview(gateway, check="record_kind:order", failure="closed")
    minute = preview.windows[0]
    assert (minute.calls, minute.refused_now, minute.newly_refused, minute.newly_allowed) == (6, 1, 5, 0)
    assert _causes(minute.newly_refused_by_cause) == {"unverifiable": 5}
    assert list(preview.switched_off) == []  # tightening switches nothing off
