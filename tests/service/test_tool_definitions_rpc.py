"""GetToolDefinitions: the policy's tools as model clients describe them, with enums from today's value sets."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import REASON_CODES, RECORDS_POLICY, WAREHOUSES, GatewayFactory, SourceServer, gateway_on
from tests.service.helpers import eventually, gateway_stub, run_program


async def definitions(gateway, *tools: str, fmt: pb.ToolFormat = pb.TOOL_FORMAT_MCP) -> pb.GetToolDefinitionsResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.GetToolDefinitionsResponse = await stub.GetToolDefinitions(
            pb.GetToolDefinitionsRequest(tools=list(tools), format=fmt), timeout=5
        )
        return response


async def test_each_format_carries_the_sets_members_as_the_enum(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    mcp = await definitions(gateway)
    assert [tool.name for tool in mcp.tools] == ["refund_order", "create_ticket", "transfer_stock"]
    refund = json.loads(mcp.tools[0].definition_json)
    schema = refund["inputSchema"]
    assert schema["properties"]["reason_code"]["enum"] == sorted(REASON_CODES)
    assert schema["required"] == ["reason_code"]
    assert [(v.name, v.version) for v in mcp.tools[0].value_sets] == [("refunds.reason_codes", 1)]
    warehouses = json.loads(mcp.tools[2].definition_json)["inputSchema"]["properties"]["warehouse_code"]
    assert warehouses["enum"] == sorted(WAREHOUSES)
    # 500 handles is over the policy's list_limit (20): named, not listed.
    assignee = json.loads(mcp.tools[1].definition_json)["inputSchema"]["properties"]["assignee"]
    assert "enum" not in assignee and "identity.handles (500 values)" in assignee["description"]

    openai = json.loads(
        (await definitions(gateway, "refund_order", fmt=pb.TOOL_FORMAT_OPENAI)).tools[0].definition_json
    )
    assert openai["type"] == "function" and openai["function"]["name"] == "refund_order"
    assert openai["function"]["parameters"] == schema
    anthropic = json.loads(
        (await definitions(gateway, "refund_order", fmt=pb.TOOL_FORMAT_ANTHROPIC)).tools[0].definition_json
    )
    assert anthropic["name"] == "refund_order" and anthropic["input_schema"] == schema


async def test_a_change_at_the_owning_service_changes_the_definition_and_its_version(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory()
    before = await definitions(gateway, "refund_order", "transfer_stock")
    again = await definitions(gateway, "refund_order", "transfer_stock")
    assert (again.version, again.tools[0].version) == (before.version, before.tools[0].version)  # stable

    source.catalog.publish("refunds.reason_codes", [*REASON_CODES, "ARRIVED_LATE"])

    async def offered() -> bool:
        return "ARRIVED_LATE" in (await definitions(gateway, "refund_order")).tools[0].definition_json

    await eventually(offered)
    after = await definitions(gateway, "refund_order", "transfer_stock")
    enum = json.loads(after.tools[0].definition_json)["inputSchema"]["properties"]["reason_code"]["enum"]
    assert enum == sorted([*REASON_CODES, "ARRIVED_LATE"])
    assert after.tools[0].version != before.tools[0].version and after.version != before.version
    assert after.tools[1].version == before.tools[1].version  # transfer_stock did not change
    assert after.tools[0].value_sets[0].version == 2


async def test_a_record_id_is_in_every_format_and_required(tmp_path: Path) -> None:
    """GetToolDefinitions tells the model of the argument a record is looked up by, as `tools export` does."""
    gateway = await gateway_on(tmp_path, RECORDS_POLICY.format(target="127.0.0.1:1"))
    try:
        for fmt, key in ((pb.TOOL_FORMAT_MCP, "inputSchema"), (pb.TOOL_FORMAT_ANTHROPIC, "input_schema")):
            (tool,) = (await definitions(gateway, "refund_order", fmt=fmt)).tools
            schema = json.loads(tool.definition_json)[key]
            assert schema["properties"]["order_id"]["type"] == "string" and schema["required"] == ["order_id"]
    finally:
        await gateway.stop(0)


async def test_an_unknown_tool_is_not_found(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await definitions(gateway, "refund_order", "no_such_tool")
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no_such_tool" in (refused.value.details() or "")


@pytest.mark.e2e
async def test_argwatch_tools_export_prints_them(gateway_factory: GatewayFactory) -> None:
    import os
    import sys

    gateway = await gateway_factory()
    argwatch = os.path.join(os.path.dirname(sys.executable), "argwatch")
    out = await run_program(
        argwatch, "tools", "export", "--gateway", gateway.target, "--format", "openai", "--tool", "refund_order"
    )
    exported = json.loads(out)
    assert exported["version"]
    [tool] = exported["tools"]
    assert tool["function"]["parameters"]["properties"]["reason_code"]["enum"] == sorted(REASON_CODES)
