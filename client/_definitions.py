"""Tool definitions from a live gateway (GetToolDefinitions): what `argwatch tools export` prints."""

from __future__ import annotations

import json
from typing import Any

from argwatch.client._errors import InvalidInput, gateway_errors
from argwatch.client._gateway import DEFAULT_TIMEOUT
from argwatch.common.channels import PLAINTEXT, ChannelSecurity, blocking_channel, service_config_options
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc

FORMATS = {"mcp": pb.TOOL_FORMAT_MCP, "openai": pb.TOOL_FORMAT_OPENAI, "anthropic": pb.TOOL_FORMAT_ANTHROPIC}


def tool_definitions(
    target: str,
    shape: str = "mcp",
    tools: list[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    security: ChannelSecurity = PLAINTEXT,
) -> dict[str, Any]:
    """The policy's tools, as the gateway at `target` describes them now, enums filled from today's value sets.

    Args:
        target: The gateway's address, "host:port".
        shape: "mcp", "openai" or "anthropic": whose tool definition format.
        tools: The tools to describe; every tool of the policy without them.
        timeout: The call's deadline, in seconds.
        security: TLS settings (argwatch.common.channels.ChannelSecurity); plaintext by default.

    Returns:
        {"version": digest, "tools": [definition, ...]}: the version changes when a set's members do.

    Raises:
        InvalidInput: `shape` is not one of the three.
        GatewayUnavailable: No answer.
        GatewayRejectedRequest: The gateway refused the request (an unknown tool, say).
    """
    if shape not in FORMATS:
        raise InvalidInput(f"shape must be one of {', '.join(FORMATS)}, got {shape!r}")
    request = pb.GetToolDefinitionsRequest(tools=tools or [], format=FORMATS[shape])
    with (
        blocking_channel(target, security, options=service_config_options()) as channel,
        gateway_errors("no tool definitions"),
    ):
        response: pb.GetToolDefinitionsResponse = gateway_pb2_grpc.GatewayStub(channel).GetToolDefinitions(
            request, timeout=timeout
        )
    return {"version": response.version, "tools": [json.loads(tool.definition_json) for tool in response.tools]}
