"""One decided call as one JSON line: what was decided and why, its argument values as the policy says.

Built on the event loop as the call is decided, in one C call for the common
case (`_digest.c`), so that the writer's queue holds bounded bytes rather than
calls; the writer's thread only writes and packs.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from argwatch.server.decisions._digest import Digester
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
# Argument names written in a line, at most; and problems and skipped checks, at most (the rest counted).
MAX_LOGGED_ARGUMENTS = 256
MAX_LOGGED_FINDINGS = 256
# Clear values in one line, in all (JSON bytes); past it the rest are hashed and named in `cut`.
MAX_CLEAR_TOTAL = 16 * 1024
# Tools whose mode fields are remembered for the mode document in force.
MAX_TOOLS_REMEMBERED = 1024


class ValueHasher:
    """Keyed BLAKE2b-256 of an argument's value under the deployment's key: BLAKE2's keyed mode is a MAC (RFC
    7693). Keyed, never a bare hash: a reader of the log cannot test guesses (a card number, an email) against
    it without the key, yet equal values give equal digests, so one value can be followed across calls. The
    digests are made in C (`_digest.c`: the value's canonical JSON and its hash in one native call, a call's
    arguments in one), the same digests hashlib gives (the tests compare them). Used on the event loop."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError(f"the decision log's key must be at least 32 bytes, got {len(key)}")
        # BLAKE2b takes a key of at most 64 bytes: a longer one is hashed down to 64, keeping its entropy.
        key = key if len(key) <= 64 else hashlib.blake2b(key, digest_size=64).digest()
        native = Digester(key, _canonical)
        # Canonical JSON: {"a":1,"b":2} and {"b":2,"a":1} are one value.
        self.digest: Callable[[object], str] = native.digest
        self.digest_bytes: Callable[[bytes], str] = native.digest_bytes
        # The first `limit` arguments' names, cut to `max_text`, to their values' digests.
        self.digest_arguments: Callable[[Mapping[str, object], int, int], dict[str, str]] = native.digest_arguments
        # A whole line in the common case (LineBuilder.line says which parts are Python's).
        self.compose = native.compose


def _canonical(value: object) -> bytes:
    """What the C digester hands back for a value it does not encode itself (floats, lists, objects)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


class LineBuilder:
    """Builds the lines, on the event loop. What a line says of the modes (the tool's mode source, the
    overrides below it) is worked out once per tool and mode document: the document only changes when on-call
    changes a mode, and is never changed in place."""

    def __init__(self, hasher: ValueHasher) -> None:
        self._hasher = hasher
        self._compose = hasher.compose
        self._document: ModeDocument | None = None
        self._heads: dict[str, bytes] = {}

    def line(
        self, at_ns: int, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency_ns: int, plan: ValuePlan
    ) -> bytes:
        """The line for one decided call, newline included. It runs once per decided call, against the log's budget
        a call (docs/performance.md), so the line is composed in C (`_digest.c`): the call's fields, the verdict's,
        the values' digests. Python makes only what is per tool (the mode fields, kept) and what is rare (problems,
        values not hashed, a session in clear, counts of what was left off), as JSON fragments it splices in."""
        head = self._heads.get(call.tool) if modes is self._document else None
        if head is None:
            head = self._head(modes, call.tool)
        arguments = call.arguments
        if (
            plan.plain
            and not verdict.problems
            and not verdict.skipped
            and type(arguments) is dict
            and len(arguments) <= MAX_LOGGED_ARGUMENTS
        ):  # most calls: every value hashed, nothing found, nothing skipped
            try:
                return self._compose(
                    at_ns, call, verdict, latency_ns, head, b"[]", b"[]", True, plan.session_hashed, b"", MAX_TEXT
                )
            except orjson.JSONEncodeError:
                pass  # a value nested deeper than orjson writes: the raw digest, below
        return self._full_line(at_ns, call, verdict, head, latency_ns, plan)

    def _full_line(
        self, at_ns: int, call: ToolCall, verdict: Verdict, head: bytes, latency_ns: int, plan: ValuePlan
    ) -> bytes:
        """The line with its rare parts: problems, skipped checks, values not all hashed, a session in clear."""
        arguments = call.arguments
        hash_arguments = plan.hashes_all and type(arguments) is dict and len(arguments) <= MAX_LOGGED_ARGUMENTS
        extra = b""
        if not hash_arguments:
            extra = _fragment(_unhashed_values(call, plan, self._hasher))
        if plan.session_clear and (call.customer_id or call.tenant):
            extra += _fragment({"session": {name: value[:MAX_TEXT] for name, value in _sent(call) if value}})
        problems, skipped = verdict.problems, verdict.skipped
        if len(problems) > MAX_LOGGED_FINDINGS or len(skipped) > MAX_LOGGED_FINDINGS:
            left_off = {
                "problems_left_off": max(0, len(problems) - MAX_LOGGED_FINDINGS),
                "skipped_left_off": max(0, len(skipped) - MAX_LOGGED_FINDINGS),
            }
            extra += _fragment(left_off)
        found = orjson.dumps(_problems(verdict)) if problems else b"[]"
        passed = orjson.dumps(_skipped(verdict)) if skipped else b"[]"
        compose = self._compose
        try:
            return compose(
                at_ns,
                call,
                verdict,
                latency_ns,
                head,
                found,
                passed,
                hash_arguments,
                plan.session_hashed,
                extra,
                MAX_TEXT,
            )
        except orjson.JSONEncodeError:  # a value nested deeper than orjson writes (it reads deeper): the raw digest
            extra = _fragment(_raw_only(call, self._hasher)) + extra
            return compose(
                at_ns, call, verdict, latency_ns, head, found, passed, False, plan.session_hashed, extra, MAX_TEXT
            )

    def _head(self, modes: ModeDocument, tool: str) -> bytes:
        """The mode fields of a tool's lines under one mode document, as a JSON fragment (kept per tool)."""
        if modes is not self._document:
            self._document, self._heads = modes, {}
        if len(self._heads) >= MAX_TOOLS_REMEMBERED:  # tools the policy lacks are the caller's to name
            self._heads.clear()
        fields = {"mode_source": source_in(modes, tool)[0], "overrides": _overrides(modes, tool)}
        head = self._heads[tool] = orjson.dumps(fields)[1:-1]
        return head


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
        found: dict[str, Any] = {"arguments": hasher.digest_arguments(dict(arguments), MAX_LOGGED_ARGUMENTS, MAX_TEXT)}
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


def _fragment(fields: Mapping[str, Any]) -> bytes:
    """`fields` as a fragment of a line: `,"key":value...` (empty when there are none)."""
    return b"," + orjson.dumps(fields)[1:-1] if fields else b""


def _unhashed_values(call: ToolCall, plan: ValuePlan, hasher: ValueHasher) -> dict[str, Any]:
    """The values' fields when they are not all simply hashed: some `clear` or `none`, too many, or undecodable."""
    if call.arguments is None:
        return _raw_only(call, hasher)
    try:
        return _values(call.arguments, plan, hasher)
    except orjson.JSONEncodeError:
        return _raw_only(call, hasher)


def _raw_only(call: ToolCall, hasher: ValueHasher) -> dict[str, Any]:
    """Undecodable or unencodable arguments: only the raw bytes' digest, so a repeat can still be found."""
    return {"arguments": None, "raw_arguments": hasher.digest_bytes(call.raw_arguments)}


def _sent(call: ToolCall) -> tuple[tuple[str, str], tuple[str, str]]:
    return ("customer_id", call.customer_id), ("tenant", call.tenant)


def _problems(verdict: Verdict) -> list[dict[str, Any]]:
    return [
        {"code": p.code._value_, "path": p.argument[:MAX_TEXT], "set": p.value_set, "shape": p.shape._value_}
        for p in verdict.problems[:MAX_LOGGED_FINDINGS]
    ]


def _skipped(verdict: Verdict) -> list[dict[str, Any]]:
    return [
        {"path": s.argument[:MAX_TEXT], "set": s.value_set, "reason": s.reason._value_}
        for s in verdict.skipped[:MAX_LOGGED_FINDINGS]
    ]
