"""The pydantic-ai gate: a toolset wrapper that checks each tool call at the gateway before the tool runs.

    from argwatch.client.gates.pydantic_ai import ArgwatchToolset
    agent = Agent(model, toolsets=[ArgwatchToolset(FunctionToolset([refund_order]), gateway=gateway)])

A call the gateway refuses never runs: the wrapper raises ModelRetry with the
repair message, which pydantic-ai hands the model as a retry prompt, so its
corrected call is checked and runs (each tool's retry limit, `retries=`, caps
the attempts as for any ModelRetry). The gateway sees the arguments as the
model wrote them (the call's raw JSON), not as pydantic coerced them. The
conversation id is the run's `conversation_id` and the model name the run's
model; each may be given instead, as a string or a function of the RunContext
(the customer, say: `customer_id=lambda ctx: ctx.deps.customer_id`). Calls
pydantic-ai itself refuses (arguments that do not validate against the tool's
signature) are retried by pydantic-ai before they reach the gate, so the
gateway does not count them. An unreachable gateway raises GatewayUnavailable:
the call is neither run nor let through unchecked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from argwatch.client._adapters import from_openai
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import CallFor, Given, check, run_allowed

Context = RunContext[Any]


@dataclass
class ArgwatchToolset(WrapperToolset[Any]):
    """`wrapped`'s tools, each call checked by argwatch first."""

    gateway: Gateway = field(kw_only=True)
    conversation_id: Given[Context] = field(default=None, kw_only=True)
    customer_id: Given[Context] = field(default=None, kw_only=True)
    tenant: Given[Context] = field(default=None, kw_only=True)
    model: Given[Context] = field(default=None, kw_only=True)
    prompt_version: Given[Context] = field(default=None, kw_only=True)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Context, tool: ToolsetTool[Any]) -> Any:
        call_id = ctx.tool_call_id or ""
        call = from_openai({"id": call_id, "function": {"name": name, "arguments": _as_written(ctx, tool_args)}})
        call_for: CallFor[Context] = CallFor(
            self.conversation_id, self.customer_id, self.tenant, self.model, self.prompt_version
        )
        found = call_for.resolve(ctx, conversation_id=ctx.conversation_id or "", model=ctx.model.model_name)
        outcome = await check(self.gateway, call, found)
        if not outcome.go_ahead:
            raise ModelRetry(outcome.tool_error)
        return await run_allowed(self.gateway, outcome, lambda: self.wrapped.call_tool(name, tool_args, ctx, tool))


def _as_written(ctx: Context, validated: dict[str, Any]) -> str:
    """The call's arguments as the model wrote them: its ToolCallPart in the run's messages (newest first);
    the validated arguments only where the part is not there."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id:
                    return part.args_as_json_str()
    return json.dumps(validated, default=str)
