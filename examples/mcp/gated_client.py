"""argwatch in an MCP client: every tools/call is checked at the gateway before it leaves for a server we do not own.

GatedSession wraps the MCP SDK's ClientSession. A call argwatch refuses never
reaches the server: the model gets a tool result with isError and the gateway's
repair message instead, as if the tool had answered. A call it allows goes on
unchanged. Nothing else about the session changes.

    python examples/mcp/gated_client.py --target 127.0.0.1:50051    # a gateway on the demo policy (make run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from argwatch.client import Gateway, from_mcp

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "refunds_server.py")


class GatedSession:
    """An MCP client session whose tool calls are checked by argwatch first."""

    def __init__(self, session: ClientSession, gateway: Gateway, conversation_id: str) -> None:
        self._session, self._gateway, self._conversation = session, gateway, conversation_id
        self._next_id = 0

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self._next_id += 1
        request = {"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}  # fmt: skip
        call = from_mcp(request)
        outcome = await self._gateway.check(call, conversation_id=self._conversation)
        if not outcome.go_ahead:
            # Answered here: the call never leaves, and the model reads why and what to send instead.
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=outcome.tool_error)], is_error=True
            )
        result = await self._session.call_tool(name, arguments)
        assert isinstance(result, types.CallToolResult)
        return result


async def run(target: str) -> list[dict[str, Any]]:
    """Two calls through the gated session: an invented reason code, then a legal one."""
    parameters = StdioServerParameters(command=sys.executable, args=[SERVER], env=dict(os.environ))
    seen = []
    async with (
        Gateway(target) as gateway,
        stdio_client(parameters) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        gated = GatedSession(session, gateway, conversation_id="mcp-demo")
        for reason in ("ITEM_DEFECTIVE", "DAMAGED_ITEM"):
            result = await gated.call_tool("refund_order", {"order_id": "ord_0012345678", "reason_code": reason})
            text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
            seen.append({"reason_code": reason, "is_error": bool(result.is_error), "text": text})
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    args = parser.parse_args()
    for step in asyncio.run(run(args.target)):
        print(json.dumps(step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
