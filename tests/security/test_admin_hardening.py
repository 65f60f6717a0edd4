"""Issue 17.10: SetMode with a mode number the contract does not define is refused (it used to clear the
override); a tokens file others may read refuses to start, as ssh refuses such a key; a certificate whose
key is not its own names both flags (gRPC said only "Failed to bind")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, gateway_on, loopback_settings, make_policy
from tests.service.helpers import admin_stub, gateway_stub, request
from tests.tls_files import make_tls_files

POLICY = """
tools:
  refund_order:
    mode: observe
    schema: {type: object, properties: {n: {type: integer}}}
"""


async def test_set_mode_with_an_unknown_mode_is_refused_and_the_override_stays(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    admin_channel, admin = admin_stub(gateway)
    channel, stub = gateway_stub(gateway)
    try:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_REJECT, reason="INC-1"), timeout=5
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.SetMode(admin_pb2.SetModeRequest(tool="refund_order", mode=7, reason="x"), timeout=5)  # type: ignore[arg-type]
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "MODE_UNSPECIFIED to clear" in (refused.value.details() or "")
        verdict = await stub.Validate(request("refund_order", {"n": "one"}), timeout=5)
        assert verdict.mode == pb.MODE_REJECT and verdict.decision == pb.DECISION_REJECT  # the override held
    finally:
        await admin_channel.close()
        await channel.close()
        await gateway.stop(0)


async def test_a_tokens_file_others_may_read_refuses_to_start_unless_allowed(
    tmp_path: Path, source: SourceServer
) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("- {name: ana, role: admin, token: admin-token-0123456789}\n")
    tokens.chmod(0o644)
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tokens))
    with pytest.raises(ValueError, match=r"readable by others \(mode 0644\): chmod 600 it"):
        await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    allowed = dataclasses.replace(settings, allow_readable_tokens=True)
    gateway = await build_gateway(allowed, policy=policy, registry=CollectorRegistry())
    await gateway.stop(0)


async def test_a_key_that_is_not_the_certificates_names_both_flags(tmp_path: Path, source: SourceServer) -> None:
    files = make_tls_files(str(tmp_path))
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), tls_cert=files.server_cert, tls_key=files.client_key)
    with pytest.raises(ValueError, match=r"--tls-cert .*server.pem and --tls-key .*client-key.pem do not go together"):
        await build_gateway(settings, policy=policy, registry=CollectorRegistry())
