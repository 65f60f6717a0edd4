"""A refunds MCP server that argwatch does not own: it runs whatever tools/call it receives.

It stands for a third-party MCP server: it checks nothing, which is why the
check belongs in the client, before the call leaves (gated_client.py). Each call
it executes is appended to the file named by REFUNDS_SERVER_LOG, so the example
and its test can see which calls reached it.

    python examples/mcp/refunds_server.py          # speaks MCP on stdio
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("refunds")


@server.tool()
def refund_order(order_id: str, reason_code: str, amount_cents: int = 0) -> str:
    """Refund an order. reason_code is one of the refunds service's reason codes."""
    executed = {"tool": "refund_order", "order_id": order_id, "reason_code": reason_code, "amount_cents": amount_cents}
    log = os.environ.get("REFUNDS_SERVER_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps(executed) + "\n")
    return f"refunded {order_id} ({reason_code})"


if __name__ == "__main__":
    server.run("stdio")
