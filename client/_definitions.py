"""Tool definitions from a live gateway (GetToolDefinitions): what `argwatch tools export` prints."""

from __future__ import annotations

import json
from typing import Any

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
    """{"version", "tools": [definition, ...]} in `shape` (mcp, openai, anthropic), from the gateway at `target`."""
    request = pb.GetToolDefinitionsRequest(tools=tools or [], format=FORMATS[shape])
    with blocking_channel(target, security, options=service_config_options()) as channel:
        response: pb.GetToolDefinitionsResponse = gateway_pb2_grpc.GatewayStub(channel).GetToolDefinitions(
            request, timeout=timeout
        )
    return {"version": response.version, "tools": [json.loads(tool.definition_json) for tool in response.tools]}
