"""One decided call as one JSON line: what was decided and why, its argument values as the policy says.

Built in the writer's thread, never on the event loop: the Validator only hands
over the call and its verdict (both immutable), and the hashing and encoding
happen here.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

import orjson

from argwatch.server.decisions.value_plan import ValuePlan
from argwatch.server.modes.document import GLOBAL, ModeDocument, source_in
from argwatch.server.policy.model import ValueLogging
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall

# Model-written text kept in a line (ids, the tool's name, argument names) is cut to this: a line stays bounded.
MAX_TEXT = 256
# A value logged `clear` whose JSON is longer than this is written hashed instead (and named in `cut`): a
# line stays bounded, and a digest still follows the value across calls.
MAX_CLEAR_BYTES = 4096


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
    at: float,
    call: ToolCall,
    verdict: Verdict,
    modes: ModeDocument,
    latency: float,
    plan: ValuePlan,
    hasher: ValueHasher,
) -> bytes:
    """The line for one decided call, newline included."""
    values: dict[str, Any] = {}
    if call.arguments is not None:
        values = _values(call.arguments, plan, hasher)
        raw = None
    else:  # undecodable: only its digest, so a repeat of the same bytes can still be found
        values = {"arguments": None}
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
        "overrides": _overrides(modes, call.tool),
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
        **values,
    }
    if raw is not None:
        record["raw_arguments"] = raw
    session = _session(call, plan.session, hasher)
    if session:
        record["session"] = session
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _overrides(modes: ModeDocument, tool: str) -> list[dict[str, str]]:
    """The overrides below the tool's mode in force when decided: its checks' modes, and every failure override
    (open or closed, on a source, set or record kind), each as on-call set it."""
    found = []
    for target, override in modes.overrides.items():
        if target.check and target.tool == tool:
            found.append({"check": target.check, "mode": override.mode.value, "actor": override.actor[:MAX_TEXT]})
        elif target.check and target.tool == GLOBAL:
            failure = "open" if override.mode.value == "observe" else "closed"
            found.append({"failure": target.check, "mode": failure, "actor": override.actor[:MAX_TEXT]})
    return found


def _values(arguments: Mapping[str, object], plan: ValuePlan, hasher: ValueHasher) -> dict[str, Any]:
    """`arguments` (name -> digest), and when the policy says so `clear` (name -> value as sent) and `unlogged`
    (names whose values are not written). Apart, so that a clear value that looks like a digest is no digest."""
    hashed: dict[str, str] = {}
    clear: dict[str, Any] = {}
    unlogged: list[str] = []
    cut: list[str] = []
    for name, value in arguments.items():
        shown = name[:MAX_TEXT]
        how = plan.of(name)
        if how is ValueLogging.NONE:
            unlogged.append(shown)
            continue
        if how is ValueLogging.CLEAR:
            encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            if len(encoded) <= MAX_CLEAR_BYTES:
                clear[shown] = value
                continue
            cut.append(shown)
            hashed[shown] = hasher.digest_bytes(encoded)
            continue
        hashed[shown] = hasher.digest(value)
    found: dict[str, Any] = {"arguments": hashed}
    if clear:
        found["clear"] = clear
    if unlogged:
        found["unlogged"] = unlogged
    if cut:
        found["cut"] = cut
    return found


def _session(call: ToolCall, how: ValueLogging, hasher: ValueHasher) -> dict[str, str]:
    """The caller's session fields that were sent, as the policy's `decision_log.session` says."""
    if how is ValueLogging.NONE:
        return {}
    sent = {"customer_id": call.customer_id, "tenant": call.tenant}
    if how is ValueLogging.CLEAR:
        return {name: value[:MAX_TEXT] for name, value in sent.items() if value}
    return {name: hasher.digest(value) for name, value in sent.items() if value}
