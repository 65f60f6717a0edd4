"""Redacted arguments: their values never reach the sampled log or the Admin API's offending values."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.telemetry.samples import SAMPLES_LOGGER
from argwatch.v1 import admin_pb2
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import admin_stub, gateway_stub, request


async def test_a_redacted_arguments_values_are_never_shown_but_still_checked(
    tmp_path: Path, source: SourceServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    base = make_policy(str(tmp_path), source.target, refund_mode="reject")
    with open(base.path) as handle:  # noqa: ASYNC230 (a small file, before anything runs)
        text = handle.read()
    assert "sampling: {rate: 1.0}" in text
    redacting = text.replace("sampling: {rate: 1.0}", "sampling: {rate: 1.0, redact: [reason_code]}")
    policy = parse_policy(redacting.encode(), base.path)
    gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            response = await stub.Validate(request("refund_order", {"reason_code": "4111-1111-1111-1111"}), timeout=5)
        assert response.problems and response.decision  # still checked and refused
        assert "4111" in response.problems[0].value  # the caller gets its own value back
        lines = [record.getMessage() for record in caplog.records if record.name == SAMPLES_LOGGER]
        assert lines and all("4111" not in line for line in lines) and '"value":"REDACTED"' in lines[0]
        channel, admin = admin_stub(gateway)
        async with channel:
            samples = await admin.ListSamples(
                admin_pb2.ListSamplesRequest(tool="refund_order", argument="reason_code"), timeout=5
            )
        assert [sample.value for sample in samples.values] == ["REDACTED"]
    finally:
        await gateway.stop(0)


async def test_a_redacted_name_is_redacted_at_any_depth_of_a_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`redact: [payment]` covers a binding on payment.network: its values are the payment's."""
    from tests.conftest import gateway_on

    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    (tmp_path / "sets.yaml").write_text("nets: {version: 1, members: [visa]}\n")
    gateway = await gateway_on(
        tmp_path,
        """
sources: {local: {file: sets.yaml}}
value_sets: {nets: {source: local}}
sampling: {rate: 1.0, redact: [payment]}
tools:
  pay:
    mode: reject
    arguments: {payment.network: {value_set: nets}}
""",
    )
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            card = {"payment": {"network": "4111-1111-1111-1111 exp 12/29"}}
            response = await stub.Validate(request("pay", card), timeout=5)
        assert [problem.argument for problem in response.problems] == ["payment.network"]
        lines = [record.getMessage() for record in caplog.records if record.name == SAMPLES_LOGGER]
        assert lines and all("4111" not in line for line in lines)
        channel, admin = admin_stub(gateway)
        async with channel:
            samples = await admin.ListSamples(
                admin_pb2.ListSamplesRequest(tool="pay", argument="payment.network"), timeout=5
            )
        assert [sample.value for sample in samples.values] == ["REDACTED"]
    finally:
        await gateway.stop(0)


def test_redact_must_be_a_list_of_names(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"sampling\.redact"):
        parse_policy(b"tools: {}\nsampling: {redact: email}\n", str(tmp_path / "p.yaml"))
