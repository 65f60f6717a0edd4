"""argwatch.client: check an agent's tool call at the gateway before it runs, from Python.

    from argwatch.client import Gateway, from_openai

    async with Gateway("127.0.0.1:50051") as gateway:
        call = from_openai(message.tool_calls[0])
        outcome = await gateway.check(call, conversation_id="conv-42", customer_id="cus_7")
        if outcome.go_ahead:
            # A tool with side effects gets a key: pass it downstream so the operation runs once.
            result = run_the_tool(call, idempotency_key=outcome.idempotency_key)
            await gateway.report_outcome(outcome, "succeeded")  # or "failed", "unknown"
        else:
            reply = call.tool_error(outcome.tool_error)  # hand this back to the model

Deadlines are set on every call (2 s by default); UNAVAILABLE is retried, with
backoff, as the published service config says; a rejection is a verdict, never
retried. SyncGateway is the same for code without an event loop. tool_definitions
fetches the policy's tools in a provider's shape (what `argwatch tools export` prints).
The modules behind these names are internal (leading underscore).
"""

from argwatch.client._adapters import ProviderToolCall, from_anthropic, from_mcp, from_openai, from_openai_responses
from argwatch.client._definitions import tool_definitions
from argwatch.client._gateway import Conversation, Gateway, Outcome, SyncGateway

__all__ = [
    "Conversation",
    "Gateway",
    "Outcome",
    "ProviderToolCall",
    "SyncGateway",
    "from_anthropic",
    "from_mcp",
    "from_openai",
    "from_openai_responses",
    "tool_definitions",
]
