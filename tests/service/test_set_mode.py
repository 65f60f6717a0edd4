"""Changing modes through the Admin API: effective on the next Validate, refused without a reason, audited."""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, loopback_settings, make_policy
from tests.service.helpers import admin_stub, eventually, gateway_stub, request


async def test_a_flip_takes_effect_on_the_next_validate_and_is_audited(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        before = await stub.Validate(request("refund_order", {"reason_code": "OTHER"}), timeout=5)
        assert before.decision == pb.DECISION_REJECT
        changed = await admin.SetMode(
            admin_pb2.SetModeRequest(
                tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-7: false rejects", expires_in_seconds=900
            ),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )
        assert (changed.change.old_mode, changed.change.new_mode, changed.change.actor) == (
            "reject",
            "observe",
            "ana@oncall",
        )
        after = await stub.Validate(request("refund_order", {"reason_code": "OTHER"}), timeout=5)
        assert (after.decision, after.mode) == (pb.DECISION_ALLOW, pb.MODE_OBSERVE)
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        refund = next(t for t in status.tools if t.tool == "refund_order")
        assert refund.mode_source == "override" and refund.HasField("mode_expires_at")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.SetMode(admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_REJECT), timeout=5)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert [c.outcome for c in trail.changes] == ["refused: a reason is required", "applied"]


async def test_refresh_value_set_fetches_the_sources_copy_now(gateway_factory: GatewayFactory, source) -> None:
    gateway = await gateway_factory(watch="false", ttl="5m")  # pulled: the next pull is minutes away
    source.catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "PRICE_MATCH"])
    channel, admin = admin_stub(gateway)
    async with channel:
        before = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        assert next(s for s in before.value_sets if s.name == "refunds.reason_codes").version == 1
        refreshed = await admin.RefreshValueSet(
            admin_pb2.RefreshValueSetRequest(name="refunds.reason_codes"), timeout=5
        )
        assert (refreshed.value_set.version, refreshed.value_set.members) == (2, 2)
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await admin.RefreshValueSet(admin_pb2.RefreshValueSetRequest(name="nope"), timeout=5)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_list_samples_shows_drift_clustered_and_inventions_scattered(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for _ in range(18):  # a renamed code, emitted again and again: drift
            await stub.Validate(request("refund_order", {"reason_code": "CUSTOMER_UNHAPPY"}), timeout=5)
        for i in range(2):
            await stub.Validate(request("refund_order", {"reason_code": f"MADE_UP_{i}"}), timeout=5)
        for i in range(12):  # scattered inventions
            await stub.Validate(request("create_ticket", {"assignee": f"someone{i}"}), timeout=5)
    admin_channel, admin = admin_stub(gateway)
    async with admin_channel:
        drift = await admin.ListSamples(
            admin_pb2.ListSamplesRequest(tool="refund_order", argument="reason_code"), timeout=5
        )
        scattered = await admin.ListSamples(
            admin_pb2.ListSamplesRequest(tool="create_ticket", argument="assignee"), timeout=5
        )
    assert (drift.total, drift.clustered, drift.values[0].value, drift.values[0].count) == (
        20,
        True,
        '"CUSTOMER_UNHAPPY"',
        18,
    )
    assert drift.values[0].shape == "invented"
    assert (scattered.total, scattered.clustered) == (12, False)


async def test_an_expiring_override_reverts_by_itself_and_says_so(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    async with channel, admin_channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-8", expires_in_seconds=1),
            timeout=5,
        )
        allowed = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
        assert allowed.decision == pb.DECISION_ALLOW

        async def reverted() -> bool:
            verdict = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
            return bool(verdict.decision == pb.DECISION_REJECT)

        await eventually(reverted)  # the 1 s expiry, swept every second
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    expired = trail.changes[0]
    assert (expired.actor, expired.old_mode, expired.new_mode, expired.outcome) == (
        "argwatch",
        "observe",
        "reject",
        "expired",
    )
    assert "INC-8" in expired.reason
    refund = next(t for t in status.tools if t.tool == "refund_order")
    assert refund.mode_source == "policy" and not refund.HasField("mode_expires_at")


async def test_overrides_and_their_audit_survive_a_restart(tmp_path, source: SourceServer) -> None:
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(loopback_settings(policy.path), mode_state=str(tmp_path / "modes.json"))
    first = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        channel, admin = admin_stub(first)
        async with channel:
            await admin.SetMode(
                admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9"),
                metadata=(("x-argwatch-actor", "ana@oncall"),),
                timeout=5,
            )
    finally:
        await first.stop(0)
    again = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        channel, stub = gateway_stub(again)
        admin_channel, admin = admin_stub(again)
        async with channel, admin_channel:
            verdict = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
            trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
            status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    finally:
        await again.stop(0)
    # The policy says reject; the on-call's observe survived the restart, and so did the record of it.
    assert (verdict.decision, verdict.mode) == (pb.DECISION_ALLOW, pb.MODE_OBSERVE)
    assert [(c.actor, c.tool, c.new_mode, c.reason) for c in trail.changes] == [
        ("ana@oncall", "refund_order", "observe", "INC-9")
    ]
    assert next(t for t in status.tools if t.tool == "refund_order").mode_source == "override"
