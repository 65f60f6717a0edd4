"""Overrides below the tool: relax one check during an incident and keep enforcing the rest (issue 29).

The incident from the issue: the order look-up fails closed and its owner is
down, so refund_order refuses every call. On-call sets the record check alone
to observe: calls pass with that check's problem listed and counted, while an
invented reason is still refused; clearing it (or its expiry) restores it.
"""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1.gateway_pb2 import Mode
from tests.conftest import loopback_settings
from tests.service import test_records_rules as records
from tests.service.helpers import admin_status, admin_stub, eventually
from tests.service.test_records_rules import Start, call, found

start = records.start  # the records tests' fixture: a real RecordSource, up or down, and a gateway on it

GOOD = {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100}
INVENTED = {"order_id": "ord_1", "reason_code": "ITEM_DEFECTIVE", "amount_cents": 100}


async def _set(gateway: RunningGateway, check: str, mode: Mode, expires: int = 0) -> admin_pb2.SetModeResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.SetModeResponse = await admin.SetMode(
            admin_pb2.SetModeRequest(
                tool="refund_order", check=check, mode=mode, reason="INC-9: orders db down", expires_in_seconds=expires
            ),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )
        return response


async def test_relaxing_the_record_check_lets_calls_through_and_keeps_refusing_invented_reasons(start: Start) -> None:
    gateway = await start(failure="closed", source_up=False)
    assert (await call(gateway, GOOD)).decision == pb.DECISION_REJECT  # fails closed: refused
    changed = await _set(gateway, "record:order", pb.MODE_OBSERVE)
    assert (changed.change.tool, changed.change.check, changed.change.new_mode) == (
        "refund_order",
        "record:order",
        "observe",
    )
    status = await admin_status(gateway)
    refund = next(tool for tool in status.tools if tool.tool == "refund_order")
    record = next(check for check in refund.checks if check.name == "record:order")
    assert (record.override_mode, record.override_actor, record.fails_closed) == ("observe", "ana@oncall", True)
    assert [check.name for check in refund.checks if not check.override_mode] == [
        "arg:reason_code",
        "rule:not_above_paid",
    ]
    relaxed = await call(gateway, GOOD)
    assert relaxed.decision == pb.DECISION_ALLOW and relaxed.mode == pb.MODE_REJECT  # the tool still rejects
    assert found(relaxed) == [(pb.PROBLEM_CODE_CHECK_UNAVAILABLE, "order_id")]  # listed, not enforced
    invented = await call(gateway, INVENTED)
    assert invented.decision == pb.DECISION_REJECT  # the value-set check is still enforced
    assert (pb.PROBLEM_CODE_OUT_OF_SET, "reason_code") in found(invented)
    await _set(gateway, "record:order", pb.MODE_UNSPECIFIED)  # cleared: enforced again
    assert (await call(gateway, GOOD)).decision == pb.DECISION_REJECT
    channel, admin = admin_stub(gateway)
    async with channel:
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert [(c.check, c.outcome) for c in trail.changes[:2]] == [
        ("record:order", "cleared"),
        ("record:order", "applied"),
    ]


async def test_a_check_can_be_enforced_on_a_tool_in_observe(start: Start) -> None:
    gateway = await start(failure="closed")
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9: watch only"), timeout=5
        )
    assert (await call(gateway, INVENTED)).decision == pb.DECISION_ALLOW  # the whole tool observes
    await _set(gateway, "arg:reason_code", pb.MODE_REJECT)
    refused = await call(gateway, INVENTED)
    assert (refused.decision, refused.mode) == (pb.DECISION_REJECT, pb.MODE_OBSERVE)
    over_paid = {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 999_999}
    assert (await call(gateway, over_paid)).decision == pb.DECISION_ALLOW  # the rule is not that check


async def test_a_check_the_tool_does_not_have_is_refused_naming_its_checks(start: Start) -> None:
    gateway = await start()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _set(gateway, "record:invoice", pb.MODE_OBSERVE)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "refund_order has no check 'record:invoice'; its checks: arg:reason_code, record:order" in (
        refused.value.details() or ""
    )


async def test_a_check_override_expires_by_itself_and_is_audited(start: Start) -> None:
    gateway = await start(failure="closed", source_up=False)
    await _set(gateway, "record:order", pb.MODE_OBSERVE, expires=1)
    assert (await call(gateway, GOOD)).decision == pb.DECISION_ALLOW

    async def enforced_again() -> bool:  # the expiry runs on the gateway's own timer
        return (await call(gateway, GOOD)).decision == pb.DECISION_REJECT

    await eventually(enforced_again)
    channel, admin = admin_stub(gateway)
    async with channel:
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert (trail.changes[0].check, trail.changes[0].outcome, trail.changes[0].actor) == (
        "record:order",
        "expired",
        "argwatch",
    )


async def _fail(gateway: RunningGateway, target: str, failure: str) -> None:
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(check=target, failure=failure, reason="INC-9: orders db down"),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )


@pytest.mark.parametrize("target", ["source:orders_db", "record_kind:order"])
async def test_fail_open_on_a_source_lets_its_checks_through_skipped_and_enforces_everything_else(
    start: Start, target: str
) -> None:
    """The issue's lever: "fail open on orders for 30 minutes", for every tool whose checks read it."""
    gateway = await start(failure="closed", source_up=False)
    await _fail(gateway, target, "open")
    relaxed = await call(gateway, GOOD)
    assert relaxed.decision == pb.DECISION_ALLOW and found(relaxed) == []
    assert [(s.argument, s.value_set) for s in relaxed.skipped] == [("order_id", "record.order")]  # counted
    assert (await call(gateway, INVENTED)).decision == pb.DECISION_REJECT
    status = await admin_status(gateway)
    assert [(f.target, f.failure, f.actor) for f in status.failure_overrides] == [(target, "open", "ana@oncall")]
    refund = next(tool for tool in status.tools if tool.tool == "refund_order")
    record = next(check for check in refund.checks if check.name == "record:order")
    assert not record.fails_closed  # as the override makes it now: no FAIL-CLOSED flag while it is in force
    await _fail(gateway, target, "")
    assert (await call(gateway, GOOD)).decision == pb.DECISION_REJECT  # cleared: fails closed again
    channel, admin = admin_stub(gateway)
    async with channel:
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert [(c.tool, c.check, c.old_mode, c.new_mode) for c in trail.changes[:2]] == [
        ("", target, "open", ""),
        ("", target, "", "open"),
    ]


async def test_a_failure_override_of_nothing_the_policy_has_or_with_a_tool_is_refused(start: Start) -> None:
    gateway = await start()
    channel, admin = admin_stub(gateway)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await admin.SetMode(admin_pb2.SetModeRequest(check="source:billing", failure="open", reason="x"))
        assert unknown.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "the policy has no 'source:billing'" in (unknown.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as with_tool:
            await admin.SetMode(
                admin_pb2.SetModeRequest(tool="refund_order", check="source:orders_db", failure="open", reason="x")
            )
        assert with_tool.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.SetMode(admin_pb2.SetModeRequest(check="source:orders_db", failure="ajar", reason="x"))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_check_override_comes_before_the_global_override_and_survives_a_restart(tmp_path) -> None:
    """Precedence as documented (check, then tool, then global), kept in the --mode-state file like the rest."""
    (tmp_path / "sets.yaml").write_text("refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM]}\n")
    (tmp_path / "policy.yaml").write_text(records.policy_yaml("127.0.0.1:9", "open"))  # no owner: fails open
    policy = load_policy(str(tmp_path / "policy.yaml"))
    settings = replace(loopback_settings(policy.path), mode_state=str(tmp_path / "modes.json"))
    first = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        channel, admin = admin_stub(first)
        async with channel:
            await admin.SetMode(admin_pb2.SetModeRequest(mode=pb.MODE_OBSERVE, reason="INC-9: all watch"), timeout=5)
            await admin.SetMode(
                admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9"), timeout=5
            )
        await _set(first, "arg:reason_code", pb.MODE_REJECT)
        refused = await call(first, INVENTED)
        assert (refused.decision, refused.mode) == (pb.DECISION_REJECT, pb.MODE_OBSERVE)  # the check decides
    finally:
        await first.stop(0)
    again = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        assert (await call(again, INVENTED)).decision == pb.DECISION_REJECT
        over_paid = {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 999_999}
        assert (await call(again, over_paid)).decision == pb.DECISION_ALLOW  # the rest observes, globally
        status = await admin_status(again)
        assert status.global_mode == pb.MODE_OBSERVE
        refund = next(tool for tool in status.tools if tool.tool == "refund_order")
        overridden = [(c.name, c.override_mode, c.override_actor) for c in refund.checks if c.override_mode]
        assert overridden == [("arg:reason_code", "reject", "ana@oncall")]
    finally:
        await again.stop(0)
