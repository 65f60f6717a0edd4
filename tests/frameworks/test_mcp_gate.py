"""The MCP gate in process: the MCP SDK's own Client on a real MCPServer, the session gated, against a real gateway."""

from __future__ import annotations

import pytest
from mcp import Client, types
from mcp.server.mcpserver import MCPServer

from argwatch.client import Gateway, Session
from argwatch.client.gates.mcp import GatedSession
from argwatch.server.process.app import RunningGateway
from tests.frameworks.expectations import (
    CORRECTED,
    CUSTOMER,
    INVENTED,
    ORDER,
    assert_refused_then_repaired,
    assert_repair_message,
    capture_samples,
    sampled,
)
from tests.service.helpers import value


def refunds_server(runs: list[dict[str, object]], *, fail: bool = False) -> MCPServer:
    server = MCPServer("refunds")

    @server.tool()
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append({"order_id": order_id, "reason_code": reason_code})
        if fail:
            raise RuntimeError("the refunds service timed out")
        return f"refunded {order_id} ({reason_code})"

    return server


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_session_without_a_conversation_id_is_one_and_the_repair_is_tracked(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    runs: list[dict[str, object]] = []
    async with Gateway(owned_gateway.target) as gateway, Client(refunds_server(runs)) as client:
        session = GatedSession(client.session, gateway, session=Session(customer_id=CUSTOMER, model="gpt-4.1-mini"))
        refused = await session.call_tool("refund_order", {"order_id": ORDER, "reason_code": INVENTED})
        done = await session.call_tool("refund_order", {"order_id": ORDER, "reason_code": CORRECTED})
        assert (await session.list_tools()).tools[0].name == "refund_order"  # the rest is the session's own
    assert refused.is_error and not done.is_error
    assert_repair_message(text(refused))
    conversation = str(sampled(caplog)[0]["conversation_id"])
    assert conversation.startswith("mcp-session-")
    assert_refused_then_repaired(owned_gateway, caplog, conversation_id=conversation, model="gpt-4.1-mini", runs=runs)


async def test_a_tool_error_from_the_server_is_reported_unknown(owned_gateway: RunningGateway) -> None:
    runs: list[dict[str, object]] = []
    async with Gateway(owned_gateway.target) as gateway, Client(refunds_server(runs, fail=True)) as client:
        session = GatedSession(client.session, gateway, session=Session(conversation_id="c", customer_id=CUSTOMER))
        result = await session.call_tool("refund_order", {"order_id": ORDER, "reason_code": CORRECTED})
    assert result.is_error and len(runs) == 1
    registry = owned_gateway.registry
    assert value(registry, "argwatch_outcome_reports_total", tool="refund_order", outcome="unknown") == 1
    assert value(registry, "argwatch_outcome_reports_total", tool="refund_order", outcome="succeeded") == 0
