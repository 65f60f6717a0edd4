"""The OpenAI Agents SDK gate, run by the SDK's own Runner on its ScriptedModel against a real gateway."""

from __future__ import annotations

import json

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    ToolInputGuardrailData,
    function_tool,
    set_trace_processors,
)
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from argwatch.client import Gateway, Session
from argwatch.client.gates.openai_agents import _model_name, gate_agent
from argwatch.server.process.app import RunningGateway
from tests.conftest import GatewayFactory
from tests.frameworks.expectations import (
    CORRECTED,
    CUSTOMER,
    INVENTED,
    ORDER,
    assert_refused_then_repaired,
    assert_repair_message,
    capture_samples,
    sampled,
)


@pytest.fixture(autouse=True)
def no_trace_export() -> None:
    """Traces stay in the process: the SDK's default processor would send them to OpenAI."""
    set_trace_processors([])


async def test_an_invented_code_is_refused_the_model_repairs_it_and_the_tool_runs_once(
    owned_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    running = owned_gateway
    runs: list[dict[str, object]] = []

    @function_tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append({"order_id": order_id, "reason_code": reason_code})
        return f"refunded {order_id} ({reason_code})"

    model = ScriptedModel(
        [
            [function_call("refund_order", {"order_id": ORDER, "reason_code": INVENTED}, call_id="call_1")],
            [function_call("refund_order", {"order_id": ORDER, "reason_code": CORRECTED}, call_id="call_2")],
            [assistant_message("Refunded.")],
        ]
    )
    async with Gateway(running.target) as gateway:
        agent = gate_agent(
            Agent(name="support", model=model, tools=[refund_order]),
            gateway,
            session=Session(customer_id=CUSTOMER, model="gpt-4.1-mini"),  # the ScriptedModel has no name of its own
        )
        result = await Runner.run(agent, "refund my order", run_config=RunConfig(group_id="thread-42"))

    assert result.final_output == "Refunded."
    model.assert_complete()
    # The second model call saw the repair message as the first call's output, not a tool result.
    second = model.calls[1].input
    outputs = [item for item in second if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert [item["call_id"] for item in outputs] == ["call_1"]
    assert_repair_message(str(outputs[0]["output"]))
    third = [item for item in model.calls[2].input if isinstance(item, dict) and item.get("call_id") == "call_2"]
    assert json.loads(third[0]["arguments"])["reason_code"] == CORRECTED
    # A guardrail runs before the tool and never sees how it went: no outcome is reported.
    assert_refused_then_repaired(
        running, caplog, conversation_id="thread-42", model="gpt-4.1-mini", runs=runs, reported=None
    )


async def test_agents_sharing_a_tool_each_keep_their_own_customer(owned_gateway: RunningGateway) -> None:
    runs: list[str] = []

    @function_tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        runs.append(order_id)
        return "refunded"

    def legal_call() -> ScriptedModel:
        return ScriptedModel(
            [
                [function_call("refund_order", {"order_id": ORDER, "reason_code": CORRECTED}, call_id="call_1")],
                [assistant_message("Done.")],
            ]
        )

    async with Gateway(owned_gateway.target) as gateway:
        # One module-level tool, two requests' agents: the second must not take the first's customer.
        owners = gate_agent(
            Agent(name="a", model=legal_call(), tools=[refund_order]), gateway, session=Session(customer_id=CUSTOMER)
        )
        others = gate_agent(
            Agent(name="b", model=legal_call(), tools=[refund_order]), gateway, session=Session(customer_id="cus_other")
        )
        assert refund_order.tool_input_guardrails is None  # the tool itself is left as it was
        await Runner.run(owners, "refund", run_config=RunConfig(tracing_disabled=True))
        assert runs == [ORDER]
        await Runner.run(others, "refund", run_config=RunConfig(tracing_disabled=True))
    assert runs == [ORDER]  # not the other customer's order: refused (counted NOT_OWNED, told as NOT_FOUND)


async def test_each_untraced_run_is_a_conversation_of_its_own(
    gateway_factory: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    running = await gateway_factory(refund_mode="observe")

    @function_tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        return "refunded"

    async with Gateway(running.target) as gateway:
        for _ in range(2):
            model = ScriptedModel(
                [
                    [function_call("refund_order", {"order_id": ORDER, "reason_code": INVENTED}, call_id="call_1")],
                    [assistant_message("Done.")],
                ]
            )
            agent = gate_agent(Agent(name="support", model=model, tools=[refund_order]), gateway)
            # Tracing off: every run's trace id is the SDK's "no-op", which must not join them.
            await Runner.run(agent, "refund", run_config=RunConfig(tracing_disabled=True))
    first, second = (offence["conversation_id"] for offence in sampled(caplog))
    assert str(first).startswith("run-") and str(second).startswith("run-") and first != second
    # The provider's id leads each call's own: "call_1" in both runs, never one id for two calls.
    ids = [str(offence["call_id"]) for offence in sampled(caplog)]
    assert ids[0] != ids[1] and all(call_id.startswith("call_1~") for call_id in ids)


async def test_an_agent_whose_mcp_servers_the_gate_cannot_reach_is_refused() -> None:
    server = MCPServerStdio(params={"command": "true"})  # never started: only its presence matters
    async with Gateway("127.0.0.1:1") as gateway:  # never called
        with pytest.raises(ValueError, match="has MCP servers"):
            gate_agent(Agent(name="a", mcp_servers=[server]), gateway)


async def test_without_a_group_id_the_conversation_is_the_run_s_trace_id(
    gateway_factory: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    capture_samples(caplog)
    running = await gateway_factory(refund_mode="observe")  # let through, recorded

    @function_tool
    def refund_order(order_id: str, reason_code: str) -> str:
        """Refund an order."""
        return "refunded"

    model = ScriptedModel(
        [
            [function_call("refund_order", {"order_id": ORDER, "reason_code": INVENTED}, call_id="call_1")],
            [assistant_message("Done.")],
        ]
    )
    async with Gateway(running.target) as gateway:
        agent = gate_agent(Agent(name="support", model=model, tools=[refund_order]), gateway)
        await Runner.run(agent, "refund", run_config=RunConfig(trace_id="trace_0123456789abcdef"))
    (offence,) = sampled(caplog)
    assert (offence["conversation_id"], offence["model"]) == ("trace_0123456789abcdef", "")


def test_the_model_name_is_the_agent_s_or_the_run_config_s() -> None:
    # The SDK's own model objects, built with a client that is never called (nothing leaves the machine).
    client = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9")
    responses = OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client)
    chat = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)

    def data(agent_model: object, run_model: object = None) -> ToolInputGuardrailData:
        context = ToolContext(
            context=None,
            tool_name="refund_order",
            tool_call_id="call_1",
            tool_arguments="{}",
            run_config=RunConfig(model=run_model),  # type: ignore[arg-type]
        )
        return ToolInputGuardrailData(context=context, agent=Agent(name="a", model=agent_model))  # type: ignore[arg-type]

    assert _model_name(data("gpt-5")) == "gpt-5"
    assert _model_name(data(responses)) == "gpt-4.1-mini"
    assert _model_name(data(chat)) == "gpt-4o"
    assert _model_name(data(responses, run_model="o4-mini")) == "o4-mini"  # the run config's model wins, as in the SDK
    assert _model_name(data(ScriptedModel([]))) == ""
