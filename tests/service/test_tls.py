"""TLS on the Gateway listener and mTLS on the Admin listener, with real certificates over loopback."""

from __future__ import annotations

import os
from dataclasses import replace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import request
from tests.tls_files import make_tls_files


def trusting(ca_path: str) -> grpc.ChannelCredentials:
    with open(ca_path, "rb") as handle:
        return grpc.ssl_channel_credentials(root_certificates=handle.read())


async def test_tls_gateway_and_mtls_admin_accept_the_right_clients_only(tmp_path, source: SourceServer) -> None:
    files = make_tls_files(str(tmp_path))
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(
        loopback_settings(policy.path),
        tls_cert=files.server_cert,
        tls_key=files.server_key,
        admin_tls_client_ca=files.ca,
    )
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    try:
        trusted = trusting(files.ca)
        async with grpc.aio.secure_channel(gateway.target, trusted) as channel:
            verdict = await gateway_pb2_grpc.GatewayStub(channel).Validate(
                request("refund_order", {"reason_code": "MADE_UP"}), timeout=5
            )
        assert verdict.decision == pb.DECISION_REJECT
        async with grpc.aio.insecure_channel(gateway.target) as plaintext:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await gateway_pb2_grpc.GatewayStub(plaintext).Validate(request("refund_order", {}), timeout=2)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        with_certificate = AdminClient(
            Connection(gateway.admin_target, tls_ca=files.ca, tls_cert=files.client_cert, tls_key=files.client_key)
        )
        without_certificate = AdminClient(Connection(gateway.admin_target, tls_ca=files.ca))
        try:
            status = await with_certificate.status()
            assert status.replica_id == "test-replica"
            with pytest.raises(grpc.aio.AioRpcError) as no_client_cert:
                await without_certificate.status()
            assert no_client_cert.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await with_certificate.close()
            await without_certificate.close()
    finally:
        await gateway.stop(0)


async def test_a_client_of_another_ca_is_refused_by_the_admin_listener(tmp_path, source: SourceServer) -> None:
    ours = make_tls_files(str(tmp_path))
    os.mkdir(tmp_path / "other")
    theirs = make_tls_files(str(tmp_path / "other"), ca_name="someone else's CA")
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(
        loopback_settings(policy.path), tls_cert=ours.server_cert, tls_key=ours.server_key, admin_tls_client_ca=ours.ca
    )
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    stranger = AdminClient(
        Connection(gateway.admin_target, tls_ca=ours.ca, tls_cert=theirs.client_cert, tls_key=theirs.client_key)
    )
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stranger.status()
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await stranger.close()
        await gateway.stop(0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tls_cert": "server.pem"}, "--tls-cert and --tls-key go together"),
        ({"tls_client_ca": "ca.pem"}, "needs --tls-cert and --tls-key"),
        ({"tls_cert": "server.pem", "tls_key": "policy.yaml"}, "--tls-key .*policy.yaml: not a PEM file"),
        ({"tls_cert": "missing.pem", "tls_key": "server-key.pem"}, "--tls-cert .*missing.pem: No such file"),
    ],
)
async def test_tls_settings_that_do_not_go_together_refuse_to_start(
    tmp_path, source: SourceServer, changes: dict[str, str], message: str
) -> None:
    make_tls_files(str(tmp_path))
    policy = make_policy(str(tmp_path), source.target)
    settings = replace(loopback_settings(policy.path), **{k: str(tmp_path / v) for k, v in changes.items()})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        await build_gateway(settings, policy=policy, registry=CollectorRegistry())
