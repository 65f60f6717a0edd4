"""How long each caller-supplied string may be: longer is INVALID_ARGUMENT, naming the field and the limit.

The gateway keeps these strings (a rejected call by its call id, a repair by
its conversation, an operation by its customer): 150 calls with 2 MB
conversation ids once took a gateway from 218 to 808 MiB. With every string
capped, and every table that keeps them capped in entries, what a caller can
make the gateway hold has a ceiling (docs/security.md gives it). The limits
sit well above what the providers' SDKs produce (call ids of ~30 characters,
tool names of at most 64 for OpenAI and 128 for MCP).
"""

from __future__ import annotations

from argwatch.v1 import gateway_pb2 as pb

MAX_TOOL = 128
MAX_CALL_ID = 128
MAX_CONVERSATION_ID = 256
MAX_CUSTOMER_ID = 256
MAX_TENANT = 256
MAX_MODEL = 128
MAX_PROMPT_VERSION = 128
# The request's strings' limits in the order the C readers take them (_request.c, _answers.c).
FIELD_LIMITS = (MAX_TOOL, MAX_CONVERSATION_ID, MAX_CALL_ID, MAX_CUSTOMER_ID, MAX_TENANT, MAX_MODEL, MAX_PROMPT_VERSION)
MAX_REASON = 1024  # a mode change's reason, kept in the audit
MAX_CHECK = 300  # a mode change's check of a tool ("arg:" and an argument path), kept in the audit


class TooLong(ValueError):
    """A caller-supplied string past its limit; `field` is the request's field name."""

    def __init__(self, field: str, length: int, limit: int) -> None:
        super().__init__(f"{field} is {length} characters; at most {limit}")
        self.field = field


def check_call_ref(request: pb.RepairRequest | pb.ReportOutcomeRequest) -> None:
    """Repair's and ReportOutcome's caller strings, with Validate's limits (TooLong for the first past its own)."""
    session = request.session
    _within(
        (
            ("call_id", request.call_id, MAX_CALL_ID),
            ("conversation_id", request.conversation_id, MAX_CONVERSATION_ID),
            ("session.customer_id", session.customer_id, MAX_CUSTOMER_ID),
            ("session.tenant", session.tenant, MAX_TENANT),
        )
    )


def _within(fields: tuple[tuple[str, str, int], ...]) -> None:
    error = first_too_long(fields)
    if error is not None:
        raise error


def first_too_long(fields: tuple[tuple[str, str, int], ...]) -> TooLong | None:
    """The error for the first of `fields` (name, value, limit) past its limit; None when all are within."""
    for field, value, limit in fields:
        if len(value) > limit:
            return TooLong(field, len(value), limit)
    return None
