"""Admin.GetCoverage on a real gateway: the policy in use (a reload included), suggestions from the offending
values the gateway saw, a read token is enough, concurrent calls share one walk of the schemas, and
`argwatch coverage --admin` prints it."""

from __future__ import annotations

import argparse
import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from argwatch.server.cli.coverage_command import run
from argwatch.server.edge import admin_service
from argwatch.server.policy.coverage import PolicySurface, policy_surface
from argwatch.server.policy.model import Policy
from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from tests.conftest import gateway_on, write_sets_file
from tests.service.helpers import admin_stub, gateway_stub, request

POLICY = """
sources:
  local: {file: sets.yaml}
value_sets:
  wms.warehouses: {source: local}
tools:
  transfer_stock:
    schema:
      type: object
      properties:
        warehouse_code: {type: string}
        quantity: {type: integer, minimum: 1}
        priority: {type: string, pattern: "^P[0-4]$"}
        note: {type: string}
        carrier_code: {type: string}
      additionalProperties: false
    arguments:
      warehouse_code: {value_set: wms.warehouses}
sampling: {rate: 1.0}
"""
READER = "read-token-0123456789a"
ADMINISTRATOR = "admin-token-0123456789"
ADMIN_METADATA = ("authorization", f"Bearer {ADMINISTRATOR}")


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    write_sets_file(str(tmp_path))
    (tmp_path / "tokens.yaml").write_text(
        f"- {{name: grafana, role: read, token: {READER}}}\n- {{name: ana, role: admin, token: {ADMINISTRATOR}}}\n"
    )
    (tmp_path / "tokens.yaml").chmod(0o600)
    running = await gateway_on(tmp_path, POLICY, admin_tokens=str(tmp_path / "tokens.yaml"))
    yield running
    await running.stop(0)


async def coverage(gateway: RunningGateway) -> admin_pb2.GetCoverageResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        found: admin_pb2.GetCoverageResponse = await admin.GetCoverage(
            admin_pb2.GetCoverageRequest(), metadata=(("authorization", f"Bearer {READER}"),), timeout=5
        )
    return found


def listed(found: admin_pb2.GetCoverageResponse) -> dict[str, tuple[str, list[str]]]:
    (tool,) = found.tools
    return {row.argument: (row.coverage, list(row.constraints)) for row in tool.arguments}


async def test_a_read_token_gets_the_coverage_of_the_policy_in_use(gateway: RunningGateway) -> None:
    channel, admin = admin_stub(gateway)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.GetCoverage(admin_pb2.GetCoverageRequest(), timeout=5)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    found = await coverage(gateway)
    assert found.policy_version == gateway.policy.version
    assert listed(found) == {
        "warehouse_code": ("enumerated", ["type:string", "value_set:wms.warehouses"]),
        "quantity": ("checked", ["type:integer", "range"]),
        "priority": ("checked", ["type:string", "pattern"]),
        "note": ("typed", ["type:string"]),
        "carrier_code": ("typed", ["type:string"]),
    }
    assert (found.counts.enumerated, found.counts.checked, found.counts.typed, found.counts.unconstrained) == (
        1,
        2,
        2,
        0,
    )
    assert found.counts.covered_share == 3 / 5
    assert found.tools[0].undeclared_arguments == ""
    assert [(s.argument, s.binding) for s in found.suggestions] == [("carrier_code", "value_set")]
    assert found.samples == "this replica's offending values since it started"


async def test_few_distinct_offending_values_suggest_a_set(gateway: RunningGateway) -> None:
    """priority's pattern refuses what the model writes, and it writes two words again and again: a set."""
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index in range(12):
            arguments = {"warehouse_code": "AMS-1", "quantity": 1, "priority": "high" if index < 7 else "low"}
            await stub.Validate(request("transfer_stock", arguments), timeout=5)
        for index in range(12):  # many distinct values: no vocabulary to bind
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1", "quantity": -index}), timeout=5)
    suggested = {s.argument: s for s in (await coverage(gateway)).suggestions}
    assert suggested["priority"].binding == "value_set"
    assert suggested["priority"].reason == (
        '12 values sampled, 2 distinct ("high", "low"): the model writes it from a small vocabulary'
    )
    assert "quantity" not in suggested


async def test_the_coverage_follows_a_reloaded_policy(gateway: RunningGateway, tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(
        POLICY.replace("carrier_code: {type: string}", "carrier_code: {enum: [DHL, UPS]}")
    )
    channel, admin = admin_stub(gateway)
    async with channel:
        reloaded = await admin.ReloadPolicy(
            admin_pb2.ReloadPolicyRequest(reason="enumerate the carriers"), metadata=(ADMIN_METADATA,), timeout=10
        )
    assert reloaded.outcome == "reloaded"
    found = await coverage(gateway)
    assert found.policy_version == reloaded.policy_version
    assert listed(found)["carrier_code"] == ("enumerated", ["enum"])
    assert found.counts.covered_share == 4 / 5 and not found.suggestions


async def test_concurrent_calls_share_one_walk_of_the_policy(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call walks the schemas; calls that come meanwhile await that walk instead of each starting
    its own thread, and a caller that leaves (its deadline passed) does not cancel it for the others."""
    walks: list[str] = []

    def counted(policy: Policy) -> PolicySurface:
        walks.append(policy.version)
        return policy_surface(policy)

    monkeypatch.setattr(admin_service, "policy_surface", counted)
    call = admin_pb2.GetCoverageRequest()
    context = cast(Any, None)  # GetCoverage reads nothing of it (the token is the interceptor's)
    first = asyncio.create_task(gateway.admin.GetCoverage(call, context))
    await asyncio.sleep(0)  # it has started the walk
    first.cancel()
    found = await asyncio.gather(*(gateway.admin.GetCoverage(call, context) for _ in range(6)))
    assert walks == [gateway.policy.version]
    assert all(each == found[0] for each in found) and len(found[0].tools[0].arguments) == 5
    assert await gateway.admin.GetCoverage(call, context) == found[0]  # kept for the policy in use
    assert walks == [gateway.policy.version]
    over_the_wire = await asyncio.gather(*(coverage(gateway) for _ in range(6)))
    assert all(each == found[0] for each in over_the_wire) and len(walks) == 1


async def test_the_command_prints_what_the_admin_api_answers(
    gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(
        policy="", samples="", json=False, admin=gateway.admin_target, token_file="", interval=1.0,
        tls_ca="", tls_cert="", tls_key="", tls_server_name="",
    )  # fmt: skip
    out = io.StringIO()
    # Its own event loop in a thread: this one serves the gateway meanwhile.
    code = await asyncio.to_thread(run, args, {"ARGWATCH_ADMIN_TOKEN": READER}, out)
    assert code == 0
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(
        "5 arguments, 3 of 5 covered (60.0%): 1 enumerated, 2 checked, 2 typed only, 0 unconstrained"
    )
    assert "  carrier_code    typed          type:string" in lines
    assert lines[-1] == "sampled values read: this replica's offending values since it started"
    refused = io.StringIO()
    code = await asyncio.to_thread(run, args, {}, refused)  # no token
    assert code == 1 and refused.getvalue() == ""
    assert f"argwatch coverage: {gateway.admin_target}: UNAUTHENTICATED" in capsys.readouterr().err
