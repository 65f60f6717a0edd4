"""The pydantic-ai gate: a toolset wrapper that checks each tool call at the gateway before the tool runs.

    from argwatch.client.gates.pydantic_ai import ArgwatchToolset
    agent = Agent(model, toolsets=[ArgwatchToolset(FunctionToolset([refund_order]), gateway=gateway)])

A call the gateway refuses never runs: the wrapper raises ModelRetry with the
repair message, which pydantic-ai hands the model as a retry prompt, so its
corrected call is checked and runs (each tool's retry limit, `retries=`, caps
the attempts as for any ModelRetry). The gateway sees the arguments as the
model wrote them (the call's raw JSON), not as pydantic coerced them. The
conversation id is the run's `conversation_id` and the model name the run's
model. A `Session` given, or one from a function of the RunContext (the
customer, say: `session=lambda ctx: Session(customer_id=ctx.deps.customer_id)`),
takes their place where it has its own. Calls
pydantic-ai itself refuses (arguments that do not validate against the tool's
signature) are retried by pydantic-ai before they reach the gate, so the
gateway does not count them. A gateway that gives no verdict raises GatewayUnavailable:
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
from argwatch.client.gates._shared import GivenSession, check, run_allowed, session_for

Context = RunContext[Any]


@dataclass
class ArgwatchToolset(WrapperToolset[Any]):
    """`wrapped`'s tools, each call checked by argwatch first.

    Attributes:
        wrapped: The toolset whose calls are checked (WrapperToolset's own field).
        gateway: The gateway that checks each call.
        session: Who and what each call is for, or a function of the RunContext that says so per call.
            The run's conversation id and model fill what it leaves empty.
    """

    gateway: Gateway = field(kw_only=True)
    session: GivenSession[Context] = field(default=None, kw_only=True)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Context, tool: ToolsetTool[Any]) -> Any:
        call_id = ctx.tool_call_id or ""
        call = from_openai({"id": call_id, "function": {"name": name, "arguments": _as_written(ctx, tool_args)}})
        found = session_for(self.session, ctx, conversation_id=ctx.conversation_id or "", model=ctx.model.model_name)
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
