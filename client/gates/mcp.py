"""The MCP gate: a ClientSession whose tools/call requests are checked at the gateway before they leave.

    from argwatch.client.gates.mcp import GatedSession
    gated = GatedSession(session, gateway, session=Session(conversation_id="conv-42", customer_id="cus_7"))

A call argwatch refuses never reaches the MCP server: the caller gets a
CallToolResult with `isError` and the gateway's repair message, as if the tool
had answered, so the model reads why and what to send instead. A call it allows
goes on unchanged, and every other method is the wrapped session's. Without a
conversation id, the session is the conversation. An unreachable gateway
raises GatewayUnavailable: the call is neither sent nor let through unchecked.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from mcp import ClientSession, types

from argwatch.client._adapters import from_mcp
from argwatch.client._gateway import Gateway
from argwatch.client._session import NO_SESSION, Session
from argwatch.client.gates._shared import check, run_allowed


class GatedSession:
    """An MCP client session whose tool calls are checked by argwatch first."""

    def __init__(self, client_session: ClientSession, gateway: Gateway, /, *, session: Session = NO_SESSION) -> None:
        """Wraps `client_session`; nothing is sent until a call.

        Args:
            client_session: The MCP SDK's session whose tool calls are checked.
            gateway: The gateway that checks each call.
            session: Who and what the calls are for. Without a conversation id, this MCP session is the conversation.
        """
        self._session, self._gateway = client_session, gateway
        # Without one, the session is the conversation: attempts and repairs are counted per conversation.
        self._sent = replace(session, conversation_id=session.conversation_id or f"mcp-session-{uuid.uuid4().hex}")

    async def call_tool(
        self, name: str, arguments: dict[str, object] | None = None, *args: Any, **kwargs: Any
    ) -> types.CallToolResult:
        """ClientSession.call_tool, checked first, with the same arguments.

        Args:
            name: The tool's name.
            arguments: The tool's arguments.
            *args: ClientSession.call_tool's other arguments, passed on.
            **kwargs: ClientSession.call_tool's other keyword arguments, passed on.

        Returns:
            The server's result; for a refused call, a result marked `is_error` with the repair message.

        Raises:
            GatewayUnavailable: No verdict: the call was not sent.
        """
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
