"""Admin API tokens: no token is UNAUTHENTICATED, a read token may look but not change, refusals are audited."""

from __future__ import annotations

import dataclasses

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import admin_stub, value

ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789a"


async def test_tokens_and_roles(tmp_path, source: SourceServer) -> None:
    (tmp_path / "tokens.yaml").write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    (tmp_path / "tokens.yaml").chmod(0o600)  # as an operator keeps it; a readable one is refused
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tmp_path / "tokens.yaml"))
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    change = admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-9")
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            with pytest.raises(grpc.aio.AioRpcError) as no_token:
                await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
            assert no_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as wrong_token:
                await admin.GetStatus(
                    admin_pb2.GetStatusRequest(), metadata=(("authorization", "Bearer nope"),), timeout=5
                )
            assert wrong_token.value.code() == grpc.StatusCode.UNAUTHENTICATED

            reader = (("authorization", f"Bearer {READER}"),)
            status = await admin.GetStatus(admin_pb2.GetStatusRequest(), metadata=reader, timeout=5)
            assert status.replica_id == "test-replica"  # a read token may look
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await admin.SetMode(change, metadata=reader, timeout=5)
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED

            changed = await admin.SetMode(change, metadata=(("authorization", f"Bearer {ADMIN}"),), timeout=5)
            assert changed.change.actor == "ana@oncall"  # the token's name, not a claim in metadata
            trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), metadata=reader, timeout=5)
        assert [(c.actor, c.outcome) for c in trail.changes] == [
            ("ana@oncall", "applied"),
            ("grafana", "refused: permission_denied"),
        ]
        assert (
            value(gateway.registry, "argwatch_admin_refused_total", method="GetStatus", reason="unauthenticated") == 2
        )
        assert (
            value(gateway.registry, "argwatch_admin_refused_total", method="SetMode", reason="permission_denied") == 1
        )
    finally:
        await gateway.stop(0)


async def test_an_open_admin_api_beyond_loopback_is_refused(tmp_path, source: SourceServer) -> None:
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_listen="0.0.0.0:0")
    with pytest.raises(ValueError, match="beyond loopback, with no --admin-tokens"):
        await build_gateway(settings, policy=policy, registry=CollectorRegistry())


async def test_the_gateway_listener_does_not_serve_the_admin_api(tmp_path, source: SourceServer) -> None:
    """Agents reach only the Gateway listener; the Admin API is not there, whatever they send."""
    from argwatch.v1 import admin_pb2, admin_pb2_grpc

    policy = make_policy(str(tmp_path), source.target)
    gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    try:
        assert gateway.port != gateway.admin_port
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            admin_on_gateway_port = admin_pb2_grpc.AdminStub(channel)
            for call in (
                admin_on_gateway_port.GetStatus(admin_pb2.GetStatusRequest(), timeout=5),
                admin_on_gateway_port.SetMode(
                    admin_pb2.SetModeRequest(tool="refund_order", reason="agent"),
                    metadata=(("authorization", "Bearer an-agent-credential-0123456789"),),
                    timeout=5,
                ),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert gateway.modes.changes() == []
    finally:
        await gateway.stop(0)


async def test_tokens_never_reach_the_log_the_audit_or_the_metrics(tmp_path, source: SourceServer, caplog) -> None:
    """Every path a token travels, right and wrong: none of them may write it anywhere an operator reads."""
    from prometheus_client import generate_latest

    (tmp_path / "tokens.yaml").write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    (tmp_path / "tokens.yaml").chmod(0o600)  # as an operator keeps it; a readable one is refused
    guessed = "guessed-token-abcdefghij"
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tmp_path / "tokens.yaml"))
    caplog.set_level("DEBUG")
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    change = admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="INC-10")
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            for token in (guessed, READER, ADMIN):
                metadata = (("authorization", f"Bearer {token}"),)
                for call in (
                    admin.GetStatus(admin_pb2.GetStatusRequest(), metadata=metadata, timeout=5),
                    admin.SetMode(change, metadata=metadata, timeout=5),
                ):
                    try:
                        await call
                    except grpc.aio.AioRpcError as error:
                        assert token not in (error.details() or "")  # nor is it echoed to the caller
            trail = await admin.ListModeChanges(
                admin_pb2.ListModeChangesRequest(), metadata=(("authorization", f"Bearer {READER}"),), timeout=5
            )
    finally:
        await gateway.stop(0)
    assert "admin call refused" in caplog.text  # the refusals were logged, by method and reason
    written = caplog.text + str(trail) + generate_latest(gateway.registry).decode()
    for token in (guessed, READER, ADMIN):
        assert token not in written


async def test_only_an_admin_token_reloads_the_policy(tmp_path, source: SourceServer) -> None:
    (tmp_path / "tokens.yaml").write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    (tmp_path / "tokens.yaml").chmod(0o600)
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tmp_path / "tokens.yaml"))
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    reload = admin_pb2.ReloadPolicyRequest(reason="CHG-7")
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            with pytest.raises(grpc.aio.AioRpcError) as no_token:
                await admin.ReloadPolicy(reload, timeout=5)
            assert no_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await admin.ReloadPolicy(reload, metadata=(("authorization", f"Bearer {READER}"),), timeout=5)
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
            done = await admin.ReloadPolicy(reload, metadata=(("authorization", f"Bearer {ADMIN}"),), timeout=5)
        assert done.outcome == "unchanged"
        assert [(c.actor, c.target, c.outcome) for c in gateway.modes.changes()] == [
            ("ana@oncall", "@policy", "unchanged"),
            ("grafana", "?", "refused: permission_denied"),  # the refused read token, audited; no token: not
        ]
    finally:
        await gateway.stop(0)
