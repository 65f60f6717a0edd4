"""The OpenAI Agents SDK gate: a tool input guardrail that checks each function tool call at the gateway.

    from argwatch.client.gates.openai_agents import gate_agent
    agent = gate_agent(Agent(name="support", tools=[refund_order]), gateway, customer_id="cus_7")

The guardrail runs before the tool. A call the gateway refuses never runs: the
SDK hands the model the repair message as the tool's output (its
`reject_content` behaviour), and the run goes on, so the model's corrected call
is checked and runs. The conversation id is the run's `group_id` (the SDK's
"chat thread ID"), else its trace id; the model name is the agent's (or the run
config's) where it is a name. `customer_id`, `tenant` and the other two take a
string or a function of the tool's context. An unreachable gateway raises: the
call is neither run nor let through unchecked.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData
from agents.tool_context import ToolContext
from agents.tracing import get_current_trace

from argwatch.client._adapters import from_openai_responses
from argwatch.client._gateway import Gateway
from argwatch.client.gates._shared import CallFor, Given

Context = ToolContext[Any]


def argwatch_guardrail(
    gateway: Gateway,
    *,
    conversation_id: Given[Context] = None,
    customer_id: Given[Context] = None,
    tenant: Given[Context] = None,
    model: Given[Context] = None,
) -> ToolInputGuardrail[Any]:
    """A guardrail to put in a function tool's `tool_input_guardrails`."""
    call_for: CallFor[Context] = CallFor(conversation_id, customer_id, tenant, model)

    async def argwatch(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        call = from_openai_responses(
            {"call_id": context.tool_call_id, "name": context.tool_name, "arguments": context.tool_arguments}
        )
        found = call_for.resolve(context, conversation_id=_conversation(context), model=_model_name(data))
        outcome = await gateway.check(call, **found)
        if outcome.go_ahead:
            return ToolGuardrailFunctionOutput.allow(output_info=outcome.verdict.call_id)
        return ToolGuardrailFunctionOutput.reject_content(outcome.tool_error, output_info=outcome.verdict.call_id)

    return ToolInputGuardrail(guardrail_function=argwatch, name="argwatch")


def gate_agent(
    agent: Agent[Any],
    gateway: Gateway,
    *,
    conversation_id: Given[Context] = None,
    customer_id: Given[Context] = None,
    tenant: Given[Context] = None,
    model: Given[Context] = None,
) -> Agent[Any]:
    """`agent` with the argwatch guardrail on each of its function tools (added once; the agent's own
    guardrails stay and run too). Returns the same agent."""
    guardrail = argwatch_guardrail(
        gateway, conversation_id=conversation_id, customer_id=customer_id, tenant=tenant, model=model
    )
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            kept = [g for g in tool.tool_input_guardrails or [] if g.get_name() != "argwatch"]
            tool.tool_input_guardrails = [guardrail, *kept]
    return agent


def _conversation(context: Context) -> str:
    run_config = context.run_config
    if run_config is not None and run_config.group_id:
        return run_config.group_id
    trace = get_current_trace()
    return trace.trace_id if trace is not None else ""


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
