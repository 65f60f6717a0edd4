"""Where a call's records live: bound to its conversation and session, so a reused or known call id reaches no other.

Rejected calls (for Repair), the call ids of operations (for ReportOutcome),
repair attempts and status checks were once keyed by the call id or the
conversation id alone. Providers' call ids repeat ("call_1"), and a caller who
sent another conversation's call id could read its repair message, overwrite
it, or report its refund failed. Every such record is now keyed by the scope:
the conversation together with the session's customer and tenant, as the call
stated them. Another scope finds nothing, as though the id had never been seen.

The scope is the conversation id itself when the session is empty, so keys of
callers that send no session are unchanged; otherwise a hash of the three,
length-prefixed, marked "s1:". A conversation id that itself begins "s1:" is
hashed too (with an empty session), so that no choice of strings makes two
scopes meet. A call with neither a conversation nor a session is bound to
nothing but its id: docs/calling.md tells every client to send both.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple


class CallRef(NamedTuple):
    """A call named by Repair or ReportOutcome: its id, and the conversation and session it claims."""

    call_id: str
    conversation_id: str = ""
    customer_id: str = ""
    tenant: str = ""

    @property
    def scope(self) -> str:
        return conversation_scope(self.conversation_id, self.customer_id, self.tenant)


def conversation_scope(conversation_id: str, customer_id: str, tenant: str) -> str:
    """The conversation as bound to its session (never empty when the conversation is not)."""
    if not customer_id and not tenant and not conversation_id.startswith(_HASHED):
        return conversation_id
    return _HASHED + _digest(conversation_id, customer_id, tenant)


_HASHED = "s1:"


def call_key(scope: str, call_id: str) -> str:
    """One call's key within its scope: 32 hex digits, whatever the lengths of the two."""
    return _digest(scope, call_id)


def scoped_name(scope: str, name: str) -> str:
    """A name (a tool's) within a scope, as a key: attempts and status checks per conversation and tool."""
    return _digest(scope, name)


def _digest(*parts: str) -> str:
    hashed = hashlib.blake2b(digest_size=16, person=b"argwatch-scope1")
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        hashed.update(len(data).to_bytes(4, "big"))
        hashed.update(data)
    return hashed.hexdigest()
