"""Schemas at the gateway: field failures caught by an imported MCP inputSchema; invented names never become labels."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import loopback_settings
from tests.service.helpers import gateway_stub, request, series_count, value

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


@pytest.fixture
async def gateway(tmp_path) -> AsyncIterator[RunningGateway]:
    shutil.copy(os.path.join(DATA, "mcp_tools.json"), tmp_path / "mcp_tools.json")
    (tmp_path / "sets.yaml").write_text("refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM, NOT_RECEIVED]}\n")
    (tmp_path / "policy.yaml").write_text(
        "tool_definitions: [mcp_tools.json]\n"
        "sources: {local: {file: sets.yaml}}\n"
        "value_sets: {refunds.reason_codes: {source: local}}\n"
        "tools:\n"
        "  refund_order:\n"
        "    mode: reject\n"
        "    arguments: {reason_code: {value_set: refunds.reason_codes}}\n"
    )
    policy = load_policy(str(tmp_path / "policy.yaml"))
    running = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    yield running
    await running.stop(0)


async def verdict(gateway: RunningGateway, tool: str, args: dict[str, object]) -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(request(tool, args), timeout=5)
        return response


GOOD = {"order_id": "ord_123", "reason_code": "DAMAGED_ITEM", "amount_cents": 1200}


async def test_a_call_that_passes_everything_is_allowed(gateway: RunningGateway) -> None:
    response = await verdict(gateway, "refund_order", GOOD)
    assert response.decision == pb.DECISION_ALLOW and list(response.problems) == []


async def test_a_missing_required_field_and_an_invented_filter_are_each_reported(gateway: RunningGateway) -> None:
    args = {k: v for k, v in GOOD.items() if k != "amount_cents"} | {"priority_filter": "high"}
    response = await verdict(gateway, "refund_order", args)
    assert response.decision == pb.DECISION_REJECT
    assert [(p.code, p.argument) for p in response.problems] == [
        (pb.PROBLEM_CODE_MISSING_REQUIRED, "amount_cents"),
        (pb.PROBLEM_CODE_UNEXPECTED_ARGUMENT, "priority_filter"),
    ]


async def test_one_fault_is_one_problem_when_schema_and_value_set_both_see_it(gateway: RunningGateway) -> None:
    response = await verdict(gateway, "refund_order", {k: v for k, v in GOOD.items() if k != "reason_code"})
    assert [(p.code, p.argument) for p in response.problems] == [(pb.PROBLEM_CODE_MISSING_REQUIRED, "reason_code")]


async def test_schema_enum_drift_on_an_imported_tool(gateway: RunningGateway) -> None:
    response = await verdict(gateway, "search_orders", {"customer_id": "cus_1", "status": "cancelled"})
    assert response.decision == pb.DECISION_ALLOW  # observe: the imported tool's default mode
    assert [(p.code, p.argument) for p in response.problems] == [(pb.PROBLEM_CODE_OUT_OF_SET, "status")]


async def test_invented_argument_names_never_become_metric_labels(gateway: RunningGateway) -> None:
    channel, stub = gateway_stub(gateway)
    async with channel:
        await stub.Validate(request("refund_order", GOOD | {"warmup": 1}), timeout=5)
        before = series_count(gateway.registry)
        for i in range(1000):
            await stub.Validate(request("refund_order", GOOD | {f"invented_{i}": i}), timeout=5)
    assert series_count(gateway.registry) == before
    assert (
        value(
            gateway.registry,
            "tool_argument_problems_total",
            tool="refund_order",
            argument="_unknown",
            code="unexpected_argument",
        )
        == 1001
    )
