"""Session: who and what one tool call is for, as every check, repair and outcome report names it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Session:
    """Who and what a tool call is for. Every field may stay empty.

    The gateway keeps a call under its id together with `conversation_id`, `customer_id` and `tenant`:
    repairing it or reporting its outcome names the same three, or the call is not found.

    Attributes:
        conversation_id: The agent run's or thread's id: repair attempts are counted per conversation,
            and calls without one all share a single empty conversation.
        customer_id: Whom the agent acts for; the policy's ownership checks compare records with it.
        tenant: The tenant the customer belongs to, where there are several.
        model: The model that wrote the call: kept with sampled offending values, and splits the rates
            where the policy declares it.
        prompt_version: The prompt the model ran with: splits the rates where the policy declares it.
    """

    conversation_id: str = ""
    customer_id: str = ""
    tenant: str = ""
    model: str = ""
    prompt_version: str = ""


NO_SESSION = Session()
