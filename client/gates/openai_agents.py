"""The OpenAI Agents SDK gate: a tool input guardrail that checks each function tool call at the gateway.

    from argwatch.client.gates.openai_agents import gate_agent
    agent = gate_agent(Agent(name="support", tools=[refund_order]), gateway, session=Session(customer_id="cus_7"))

The guardrail runs before the tool. A call the gateway refuses never runs: the
SDK hands the model the repair message as the tool's output (its
`reject_content` behaviour), and the run goes on, so the model's corrected call
is checked and runs. `gate_agent` returns a gated copy of the agent (and of the
agents it hands off to); the tools it was given stay as they were, since a
module-level tool is shared by every agent that lists it, and gating it in
place would give one request's customer to another's calls.

The conversation id is the run's `group_id` (the SDK's "chat thread ID"), else
its trace id, else an id minted for the run. The model name is the run
config's or the agent's, where it is a name. A `Session` given, or one from
a function of the tool's context, takes their place where it has its own. A
gateway that gives no verdict raises GatewayUnavailable: the call is neither
run nor let through unchecked. An agent's MCP servers are not gated here:
`gate_agent` refuses an agent that has them (put `argwatch_guardrail(...)` in
each server's `tool_input_guardrails`, with a per-request session as a
function of the context).
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from typing import Any, TypeVar

from agents import Agent, FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData
from agents.tool_context import ToolContext
from agents.tracing import get_current_trace

from argwatch.client._adapters import from_openai_responses
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import GivenSession, check, session_for

Context = ToolContext[Any]
T = TypeVar("T")  # the agent's own context type, kept by its gated copy
NAME = "argwatch"


def argwatch_guardrail(gateway: Gateway, *, session: GivenSession[Context] = None) -> ToolInputGuardrail[Any]:
    """A guardrail to put in a function tool's (or an MCP server's) `tool_input_guardrails`.

    Args:
        gateway: The gateway that checks each call.
        session: Who and what each call is for, or a function of the tool's context that says so per call.
            The run's group id (else its trace or an id of its own) and the model's name fill what it leaves empty.
    """

    async def argwatch(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        call = from_openai_responses(
            {"call_id": context.tool_call_id, "name": context.tool_name, "arguments": context.tool_arguments}
        )
        found = session_for(session, context, conversation_id=_conversation(context), model=_model_name(data))
        outcome = await check(gateway, call, found)
        if outcome.go_ahead:
            return ToolGuardrailFunctionOutput.allow(output_info=outcome.call_id)
        return ToolGuardrailFunctionOutput.reject_content(outcome.tool_error, output_info=outcome.call_id)

    return ToolInputGuardrail(guardrail_function=argwatch, name=NAME)


def gate_agent(agent: Agent[T], gateway: Gateway, *, session: GivenSession[Context] = None) -> Agent[T]:
    """A copy of `agent`, and of every agent it hands off to, whose function tools are copies carrying the
    argwatch guardrail first (their own guardrails run too). `agent` and its tools are left unchanged.

    Args:
        agent: The agent to gate.
        gateway: The gateway that checks each call.
        session: As argwatch_guardrail's.

    Raises:
        ValueError: The agent, or one it hands off to, has MCP servers or a Handoff object, out of the gate's reach.
    """
    guardrail = argwatch_guardrail(gateway, session=session)
    copies: dict[int, Agent[Any]] = {}

    def gated(original: Agent[Any]) -> Agent[Any]:
        if id(original) in copies:  # agents may hand off to each other: one copy each
            return copies[id(original)]
        if original.mcp_servers:
            raise ValueError(
                f"agent {original.name!r} has MCP servers, whose tools gate_agent cannot gate: put "
                "argwatch_guardrail(...) in each server's tool_input_guardrails"
            )
        tools = [_gated_tool(tool, guardrail) for tool in original.tools]
        copy = original.clone(tools=tools)
        copies[id(original)] = copy
        handoffs: list[Any] = []
        for handoff in original.handoffs:
            if not isinstance(handoff, Agent):  # a Handoff object builds its agent when invoked: out of reach
                raise ValueError(
                    f"agent {original.name!r} hands off through a Handoff object, whose agent gate_agent cannot "
                    "gate: gate that agent with gate_agent before building the Handoff"
                )
            handoffs.append(gated(handoff))
        copy.handoffs = handoffs
        return copy

    return gated(agent)


def _gated_tool(tool: Any, guardrail: ToolInputGuardrail[Any]) -> Any:
    if not isinstance(tool, FunctionTool):
        return tool  # hosted tools (web search, ...) run at the provider: no call of ours to check
    kept = [g for g in tool.tool_input_guardrails or [] if g.get_name() != NAME]
    return dataclasses.replace(tool, tool_input_guardrails=[guardrail, *kept])


# A run without a group_id or a real trace (tracing disabled: every run's trace is "no-op") gets an id of its
# own, kept while the run is: its Usage object is the one every tool context of the run shares.
_MINTED: dict[int, str] = {}


def _conversation(context: Context) -> str:
    run_config = context.run_config
    if run_config is not None and run_config.group_id:
        return run_config.group_id
    trace = get_current_trace()
    if trace is not None and trace.trace_id.startswith("trace_"):
        return trace.trace_id
    key = id(context.usage)
    if key not in _MINTED:
        _MINTED[key] = f"run-{uuid.uuid4().hex}"
        weakref.finalize(context.usage, _MINTED.pop, key, None)
    return _MINTED[key]


def _model_name(data: ToolInputGuardrailData) -> str:
    """The model by name where the agent (or the run config) gives one: a string, or an SDK model
    object that keeps its name in `.model` (OpenAIResponsesModel, OpenAIChatCompletionsModel)."""
    run_config = data.context.run_config
    for chosen in (run_config.model if run_config is not None else None, data.agent.model):
        if isinstance(chosen, str):
            return chosen
        name = getattr(chosen, "model", None)
        if isinstance(name, str):
            return name
    return ""
