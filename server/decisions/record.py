"""One decided call as one JSON line: what was decided and why, its argument values as the policy says.

Built in the writer's thread, never on the event loop: the Validator only hands
over the call and its verdict (both immutable), and the hashing and encoding
happen here.
"""

from __future__ import annotations

import hashlib
import itertools
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


# What a hashed value starts with: the MAC that made it (a reader can tell a digest from a clear value by name).
DIGEST_PREFIX = "blake2b-256:"
# Values this short are the ones that repeat across calls (codes, tenants, customers, amounts): their digests
# are remembered, up to REMEMBERED of them, then forgotten all at once (the table stays bounded).
REMEMBERED_BYTES = 64
REMEMBERED = 4096
# Argument names written in a line, at most; and problems and skipped checks, at most (the rest counted).
MAX_LOGGED_ARGUMENTS = 256
MAX_LOGGED_FINDINGS = 256
# Clear values in one line, in all (JSON bytes); past it the rest are hashed and named in `cut`.
MAX_CLEAR_TOTAL = 16 * 1024
# Tools whose mode fields are remembered for the mode document in force.
MAX_TOOLS_REMEMBERED = 1024


class ValueHasher:
    """Keyed BLAKE2b-256 of an argument's value under the deployment's key: BLAKE2's keyed mode is a MAC (RFC
    7693), one C call per value where HMAC-SHA256 is two hashes and Python-level copies. Keyed, never a bare
    hash: a reader of the log cannot test guesses (a card number, an email) against it without the key, yet
    equal values give equal digests, so one value can be followed across calls. Used by the writer's thread
    only."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError(f"the decision log's key must be at least 32 bytes, got {len(key)}")
        # BLAKE2b takes a key of at most 64 bytes: a longer one is hashed down to 64, keeping its entropy.
        key = key if len(key) <= 64 else hashlib.blake2b(key, digest_size=64).digest()
        self._keyed = hashlib.blake2b(key=key, digest_size=32)  # the key's block compressed once, copied per value
        self._recent: dict[bytes, str] = {}
        self._texts: dict[str, str] = {}  # the same memory for string values, keyed by the string

    def digest(self, value: object) -> str:
        if type(value) is str:  # most values: a repeated one is found by the text itself, not encoded first
            known = self._texts.get(value)
            if known is not None:
                return known
            digest = self.digest_bytes(orjson.dumps(value), remember=False)
            if len(value) <= REMEMBERED_BYTES:
                if len(self._texts) >= REMEMBERED:
                    self._texts.clear()
                self._texts[value] = digest
            return digest
        # Canonical JSON: {"a":1,"b":2} and {"b":2,"a":1} are one value.
        return self.digest_bytes(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))

    def digest_bytes(self, data: bytes, remember: bool = True) -> str:
        short = remember and len(data) <= REMEMBERED_BYTES
        if short and (known := self._recent.get(data)) is not None:
            return known
        mac = self._keyed.copy()
        mac.update(data)
        digest = DIGEST_PREFIX + mac.hexdigest()
        if short:
            if len(self._recent) >= REMEMBERED:
                self._recent.clear()
            self._recent[data] = digest
        return digest


class LineBuilder:
    """Builds the lines, in the writer's thread. What a line says of the modes (the tool's mode source, the
    overrides below it) is worked out once per tool and mode document: the document only changes when on-call
    changes a mode, and is never changed in place."""

    def __init__(self, hasher: ValueHasher) -> None:
        self._hasher = hasher
        self._document: ModeDocument | None = None
        self._modes: dict[str, tuple[str, list[dict[str, str]]]] = {}

    def line(
        self, at: float, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency: float, plan: ValuePlan
    ) -> bytes:
        """The line for one decided call, newline included."""
        hasher = self._hasher
        values: dict[str, Any] | None = None
        if call.arguments is not None:
            try:
                values = _values(call.arguments, plan, hasher)
            except orjson.JSONEncodeError:  # nested deeper than orjson writes (it reads deeper): the raw digest
                values = None
        if values is None:  # undecodable, or unencodable: only its digest, so a repeat can still be found
            values = {"arguments": None, "raw_arguments": hasher.digest_bytes(call.raw_arguments)}
        source, overrides = self._mode_fields(modes, call.tool)
        record: dict[str, Any] = {
            "ts": at,
            "call_id": call.call_id[:MAX_TEXT],
            "conversation_id": call.conversation_id[:MAX_TEXT],
            "tool": call.tool[:MAX_TEXT],
            "model": call.model[:MAX_TEXT],
            "decision": verdict.decision,  # orjson writes an enum as its value, in C
            "mode": verdict.mode,
            "mode_source": source,
            "downgraded_by_staleness": verdict.downgraded_by_staleness,
            "overrides": overrides,
            "problems": [
                {"code": p.code, "path": p.argument[:MAX_TEXT], "set": p.value_set, "shape": p.shape}
                for p in verdict.problems[:MAX_LOGGED_FINDINGS]
            ]
            if verdict.problems
            else [],
            "skipped": [
                {"path": s.argument[:MAX_TEXT], "set": s.value_set, "reason": s.reason}
                for s in verdict.skipped[:MAX_LOGGED_FINDINGS]
            ]
            if verdict.skipped
            else [],
            "policy_version": verdict.policy_version,
            "sets": {r.snapshot.name: r.snapshot.version for r in verdict.readings_used},
            "latency_seconds": latency,
            **values,
        }
        if plan.session is not ValueLogging.NONE and (call.customer_id or call.tenant):
            record["session"] = _session(call, plan.session, hasher)
        if len(verdict.problems) > MAX_LOGGED_FINDINGS or len(verdict.skipped) > MAX_LOGGED_FINDINGS:
            record["problems_left_off"] = max(0, len(verdict.problems) - MAX_LOGGED_FINDINGS)
            record["skipped_left_off"] = max(0, len(verdict.skipped) - MAX_LOGGED_FINDINGS)
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)

    def _mode_fields(self, modes: ModeDocument, tool: str) -> tuple[str, list[dict[str, str]]]:
        if modes is not self._document:
            self._document, self._modes = modes, {}
        found = self._modes.get(tool)
        if found is None:
            if len(self._modes) >= MAX_TOOLS_REMEMBERED:  # tools the policy lacks are the caller's to name
                self._modes.clear()
            found = self._modes[tool] = (source_in(modes, tool)[0], _overrides(modes, tool))
        return found


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
    (names whose values are not written). Apart, so that a clear value that looks like a digest is no digest.
    At most MAX_LOGGED_ARGUMENTS names, the rest counted in `arguments_left_off`: a call of a hundred thousand
    one-letter arguments must not make a line that pushes every earlier one out of the folder's budget."""
    left_off = 0
    if len(arguments) > MAX_LOGGED_ARGUMENTS:
        left_off = len(arguments) - MAX_LOGGED_ARGUMENTS
        arguments = dict(itertools.islice(arguments.items(), MAX_LOGGED_ARGUMENTS))
    if plan.default is ValueLogging.HASHED and not plan.by_name:  # every value hashed: most tools, most calls
        digest = hasher.digest
        found: dict[str, Any] = {"arguments": {name[:MAX_TEXT]: digest(value) for name, value in arguments.items()}}
        if left_off:
            found["arguments_left_off"] = left_off
        return found
    hashed: dict[str, str] = {}
    clear: dict[str, Any] = {}
    unlogged: list[str] = []
    cut: list[str] = []
    clear_room = MAX_CLEAR_TOTAL
    for name, value in arguments.items():
        shown = name[:MAX_TEXT]
        how = plan.of(name)
        if how is ValueLogging.NONE:
            unlogged.append(shown)
            continue
        if how is ValueLogging.CLEAR:
            encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            if len(encoded) <= min(MAX_CLEAR_BYTES, clear_room) and not _holds_redacted(encoded, plan.redacted):
                clear[shown] = value
                clear_room -= len(encoded)
                continue
            cut.append(shown)  # too long, past the line's room for clear values, or holding a redacted name
            hashed[shown] = hasher.digest_bytes(encoded)
            continue
        hashed[shown] = hasher.digest(value)
    found = {"arguments": hashed}
    if clear:
        found["clear"] = clear
    if unlogged:
        found["unlogged"] = unlogged
    if cut:
        found["cut"] = cut
    if left_off:
        found["arguments_left_off"] = left_off
    return found


def _holds_redacted(encoded: bytes, redacted: frozenset[str]) -> bool:
    """Whether a value's JSON has a key the policy redacts, at any depth ({"payment": {"card_number": ...}}).
    A key is `"name":` in compact JSON; the same bytes inside a string only make a false alarm, which hashes a
    value that could have been clear: the safe way to be wrong."""
    return any(b'"' + name.encode() + b'":' in encoded for name in redacted)


def _session(call: ToolCall, how: ValueLogging, hasher: ValueHasher) -> dict[str, str]:
    """The caller's session fields that were sent, as the policy's `decision_log.session` says (not `none`)."""
    sent = {"customer_id": call.customer_id, "tenant": call.tenant}
    if how is ValueLogging.CLEAR:
        return {name: value[:MAX_TEXT] for name, value in sent.items() if value}
    return {name: hasher.digest(value) for name, value in sent.items() if value}
