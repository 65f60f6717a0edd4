"""Drop-in gates for agent frameworks: each checks a tool call at the gateway before the framework runs it.

One module a framework, each importing only its framework (an optional extra):
- argwatch.client.gates.openai_agents  (argwatch[openai-agents]): a tool input guardrail
- argwatch.client.gates.langgraph      (argwatch[langgraph]):     a ToolNode tool-call wrapper
- argwatch.client.gates.pydantic_ai    (argwatch[pydantic-ai]):   a toolset wrapper
- argwatch.client.gates.mcp            (argwatch[mcp]):           a gated MCP ClientSession

A refused call never runs: the model gets the gateway's repair message through the framework's own
channel for a tool error, and its corrected call goes ahead. docs/frameworks.md has an example each.
"""

from argwatch.client._errors import GatewayUnavailable

# Also argwatch.client.GatewayUnavailable, where the rest of the exception tree is; kept here for existing imports.
__all__ = ["GatewayUnavailable"]
