"""argwatch.client: check an agent's tool call at the gateway before it runs, from Python.

    from argwatch.client import Gateway, Session, from_openai

    async with Gateway("127.0.0.1:50051") as gateway:
        call = from_openai(message.tool_calls[0])
        # Raises GatewayUnavailable when there is no verdict: then the tool must not run.
        outcome = await gateway.check(call, Session(conversation_id="conv-42", customer_id="cus_7"))
        if outcome.go_ahead:
            # A tool with side effects gets a key: pass it downstream so the operation runs once.
            result = run_the_tool(call, idempotency_key=outcome.idempotency_key)
            await gateway.report_outcome(outcome, "succeeded")  # or "failed", "unknown" (a CallOutcome)
        else:
            reply = call.tool_error(outcome.tool_error)  # hand this back to the model
            codes = [problem.code for problem in outcome.problems]  # "OUT_OF_SET", ...

Deadlines are set on every call (2 s by default); UNAVAILABLE is retried, with
backoff, as the published service config says; a rejection is a verdict, never
retried. SyncGateway is the same for code without an event loop. Every error
is an ArgwatchError: GatewayUnavailable (no verdict), GatewayRejectedRequest
(the request itself refused), InvalidInput (nothing to send). tool_definitions
fetches the policy's tools in a provider's shape (what `argwatch tools export` prints).
The modules behind these names are internal (leading underscore).
"""

from argwatch.client._adapters import (
    AnthropicToolResult,
    MCPToolError,
    OpenAIFunctionCallOutput,
    OpenAIToolMessage,
    ProviderToolCall,
    from_anthropic,
    from_mcp,
    from_openai,
    from_openai_responses,
)
from argwatch.client._definitions import tool_definitions
from argwatch.client._errors import (
    ArgwatchError,
    GatewayError,
    GatewayRejectedRequest,
    GatewayUnavailable,
    InvalidInput,
)
from argwatch.client._gateway import BaseGateway, Gateway, SyncGateway
from argwatch.client._outcome import CallOutcome, Outcome, Problem, ProblemCode, Shape
from argwatch.client._session import Session

__all__ = [
    "AnthropicToolResult",
    "ArgwatchError",
    "BaseGateway",
    "CallOutcome",
    "Gateway",
    "GatewayError",
    "GatewayRejectedRequest",
    "GatewayUnavailable",
    "InvalidInput",
    "MCPToolError",
    "OpenAIFunctionCallOutput",
    "OpenAIToolMessage",
    "Outcome",
    "Problem",
    "ProblemCode",
    "ProviderToolCall",
    "Session",
    "Shape",
    "SyncGateway",
    "from_anthropic",
    "from_mcp",
    "from_openai",
    "from_openai_responses",
    "tool_definitions",
]
