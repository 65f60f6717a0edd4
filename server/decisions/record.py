"""One decided call as one JSON line: what was decided and why, its argument values as HMACs.

Built in the writer's thread, never on the event loop: the Validator only hands
over the call and its verdict (both immutable), and the hashing and encoding
happen here.
"""

from __future__ import annotations

import hmac
from typing import Any

import orjson

from argwatch.server.modes.document import ModeDocument, source_in
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall

# Model-written text kept in a line (ids, the tool's name) is cut to this: a line stays bounded.
MAX_TEXT = 256


class ValueHasher:
    """HMAC-SHA256 of an argument's value under the deployment's key. Keyed, never a bare hash: a reader of
    the log cannot test guesses (a card number, an email) against it without the key, yet equal values give
    equal digests, so one value can be followed across calls."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError(f"the decision log's key must be at least 32 bytes, got {len(key)}")
        self._key = key

    def digest(self, value: object) -> str:
        # Canonical JSON: {"a":1,"b":2} and {"b":2,"a":1} are one value.
        return self.digest_bytes(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))

    def digest_bytes(self, data: bytes) -> str:
        return "hmac-sha256:" + hmac.digest(self._key, data, "sha256").hex()  # the one-call C path


def decision_line(
    at: float, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency: float, hasher: ValueHasher
) -> bytes:
    """The line for one decided call, newline included."""
    if call.arguments is not None:
        arguments: dict[str, str] | None = {name: hasher.digest(value) for name, value in call.arguments.items()}
        raw = None
    else:  # undecodable: only its digest, so a repeat of the same bytes can still be found
        arguments = None
        raw = hasher.digest_bytes(call.raw_arguments)
    record: dict[str, Any] = {
        "ts": round(at, 6),
        "call_id": call.call_id[:MAX_TEXT],
        "conversation_id": call.conversation_id[:MAX_TEXT],
        "tool": call.tool[:MAX_TEXT],
        "model": call.model[:MAX_TEXT],
        "decision": verdict.decision.value,
        "mode": verdict.mode.value,
        "mode_source": source_in(modes, call.tool)[0],  # here, off the loop: the document is immutable
        "downgraded_by_staleness": verdict.downgraded_by_staleness,
        "problems": [
            {"code": p.code.value, "path": p.argument[:MAX_TEXT], "set": p.value_set, "shape": p.shape.value}
            for p in verdict.problems
        ],
        "skipped": [
            {"path": s.argument[:MAX_TEXT], "set": s.value_set, "reason": s.reason.value} for s in verdict.skipped
        ],
        "policy_version": verdict.policy_version,
        "sets": {r.snapshot.name: r.snapshot.version for r in verdict.readings_used},
        "latency_seconds": round(latency, 6),
        "arguments": arguments,
    }
    if raw is not None:
        record["raw_arguments"] = raw
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
