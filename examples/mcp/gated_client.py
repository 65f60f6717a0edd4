"""argwatch in an MCP client: every tools/call is checked at the gateway before it leaves for a server we do not own.

GatedSession (argwatch.client.gates.mcp) wraps the MCP SDK's ClientSession. A
call argwatch refuses never reaches the server: the model gets a tool result
with isError and the gateway's repair message instead, as if the tool had
answered. A call it allows goes on unchanged. Nothing else about the session
changes.

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

from argwatch.client import Gateway, Session
from argwatch.client.gates.mcp import GatedSession

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "refunds_server.py")


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
        gated = GatedSession(session, gateway, session=Session(conversation_id="mcp-demo", model="scripted"))
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
