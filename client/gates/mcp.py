"""The MCP gate: a ClientSession whose tools/call requests are checked at the gateway before they leave.

    from argwatch.client.gates.mcp import GatedSession
    session = GatedSession(session, gateway, conversation_id="conv-42", customer_id="cus_7", model="gpt-4.1-mini")

A call argwatch refuses never reaches the MCP server: the caller gets a
CallToolResult with `isError` and the gateway's repair message, as if the tool
had answered, so the model reads why and what to send instead. A call it allows
goes on unchanged, and every other method is the wrapped session's. Without a
conversation id, the session is the conversation. An unreachable gateway
raises GatewayUnavailable: the call is neither sent nor let through unchecked.
"""

from __future__ import annotations

import uuid
from typing import Any

from mcp import ClientSession, types

from argwatch.client._adapters import from_mcp
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import check, run_allowed


class GatedSession:
    """An MCP client session whose tool calls are checked by argwatch first."""

    def __init__(
        self,
        session: ClientSession,
        gateway: Gateway,
        *,
        conversation_id: str = "",
        customer_id: str = "",
        tenant: str = "",
        model: str = "",
        prompt_version: str = "",
    ) -> None:
        self._session, self._gateway = session, gateway
        # Without one, the session is the conversation: attempts and repairs are counted per conversation.
        conversation_id = conversation_id or f"mcp-session-{uuid.uuid4().hex}"
        self._sent = {
            "conversation_id": conversation_id,
            "customer_id": customer_id,
            "tenant": tenant,
            "model": model,
            "prompt_version": prompt_version,
        }

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        """ClientSession.call_tool, checked first; the same arguments."""
        # The request as it would go on the wire; check() gives it an id no other session's call has.
        request = types.JSONRPCRequest(
            jsonrpc="2.0",
            id="mcp",
            method="tools/call",
            params={"name": name, "arguments": arguments or {}},
        )
        outcome = await check(self._gateway, from_mcp(request), self._sent)
        if not outcome.go_ahead:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=outcome.tool_error)], is_error=True
            )
        return await run_allowed(
            self._gateway,
            outcome,
            lambda: self._session.call_tool(name, arguments, *args, **kwargs),
            failed=lambda result: bool(getattr(result, "is_error", False)),  # the server's own error: acted or not
        )

    def __getattr__(self, name: str) -> Any:  # everything else is the session's own
        return getattr(self._session, name)
