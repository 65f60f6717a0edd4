"""Each tool's metric children for a validator: built in one pass at start, in turns of the loop for a reload."""

from __future__ import annotations

import asyncio

from argwatch.server.policy.model import Policy, ToolPolicy
from argwatch.server.telemetry.metrics import GatewayMetrics, ToolMeters

# Tools a turn of the loop builds the children of during a reload: 10,000 tools in one turn held every call
# for about 20 ms (a key made and looked up a tool, new children for a changed one).
TOOLS_PER_TURN = 1000


def meters_of(metrics: GatewayMetrics, tool: ToolPolicy) -> ToolMeters:
    """The tool's children (the same ones again for the same tool, bindings and side effect)."""
    bindings = [(binding.name, binding.value_set) for binding in tool.arguments]
    return metrics.for_tool(tool.name, bindings, side_effect=tool.side_effect is not None)


def tool_meters(policy: Policy, metrics: GatewayMetrics) -> dict[str, ToolMeters]:
    """Every tool's children, in one pass (at start, before the gateway listens)."""
    return {name: meters_of(metrics, tool) for name, tool in policy.tools.items()}


async def tool_meters_in_turns(policy: Policy, metrics: GatewayMetrics) -> dict[str, ToolMeters]:
    """Every tool's children, TOOLS_PER_TURN a turn of the loop: a reload's, built while calls are served."""
    meters: dict[str, ToolMeters] = {}
    for index, (name, tool) in enumerate(policy.tools.items()):
        if index and index % TOOLS_PER_TURN == 0:
            await asyncio.sleep(0)
        meters[name] = meters_of(metrics, tool)
    return meters
