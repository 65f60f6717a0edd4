"""Side effects: each operation's idempotency key, and the shared memory that catches its repeats.

An operation is a tool with `side_effect` in the policy, called in one
conversation with the same identifying arguments (`same_operation`). Its key is
a hash of those, so every replica mints the same key for it, and a value the
model may vary freely (a note) never changes it. The first call of an
operation is remembered for the tool's window in the shared cache; a later call
of the same operation within the window is a repeat. A repeat is let through
as a retry when the earlier call was reported failed, or when the policy's
status tool was called in the conversation since the earlier call; otherwise
it may be a second refund. Outcomes reported after a success never undo it.

"Conversation" here is always the scope (state/call_scope.py): the
conversation bound to its session. Two customers' conversations that share an
id ("1") are two operations with two keys, and a call id reaches only the
operation of its own scope.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

import orjson

from argwatch.server.policy.model import SideEffect
from argwatch.server.state.cache import Cache
from argwatch.server.state.call_scope import call_key, scoped_name
from argwatch.server.state.codec import shared_value
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord, Retry, Sighting
from argwatch.server.verdict.set_checks import as_json_text

KEY_PREFIX = "aw1_"  # versioned: a change in how keys are derived must not collide with old ones
_OPERATION = "argwatch:operation:"
_CALL = "argwatch:operation-call:"
_STATUS = "argwatch:status-checked:"
# Written once, never read-modified-written: a success survives any write of the record that raced it.
_SUCCEEDED = "argwatch:operation-succeeded:"
_MAX_DEPTH = 32  # numbers deeper than this are hashed as written (no model needs them as identity)


# The operation record is stored in the shared cache (Redis) as JSON, in this declared shape.
shared_value("operation")(OperationRecord)


def operation_key(
    tool: str, conversation_id: str, arguments: Mapping[str, object], raw: bytes, side_effect: SideEffect
) -> str:
    """The operation's idempotency key: the same for the same tool, scope and identifying values."""
    names = side_effect.same_operation
    chosen = {name: arguments.get(name) for name in names} if names else arguments
    try:
        body = orjson.dumps([tool, conversation_id, _canonical(chosen, 0)], option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        # Integers past 64 bits or nesting past orjson's depth: the text as sent, else a bounded rendering.
        body = tool.encode() + b"\0" + conversation_id.encode() + b"\0" + (raw or as_json_text(chosen).encode())
    return KEY_PREFIX + hashlib.blake2b(body, digest_size=16, person=b"argwatch-op-v1").hexdigest()


def _canonical(value: object, depth: int) -> object:
    """Numbers as the value they are (120.0 is 120); containers walked to a bounded depth."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {key: _canonical(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item, depth + 1) for item in value]
    return value


class Operations(Protocol):
    """What the validator keeps of operations: each call of one sighted, outcomes, status checks."""

    async def sight(
        self, key: str, tool: str, conversation_id: str, call_id: str, side_effect: SideEffect, *, runs: bool
    ) -> Sighting: ...

    async def report(self, scope: str, call_id: str, outcome: OperationOutcome) -> OperationRecord | None: ...

    async def status_checked(self, conversation_id: str, tools: tuple[tuple[str, float], ...]) -> None: ...


class NoOperations:
    """No memory of operations (an offline replay): every call is an operation's first, no outcome is known."""

    async def sight(
        self, key: str, tool: str, conversation_id: str, call_id: str, side_effect: SideEffect, *, runs: bool
    ) -> Sighting:
        return Sighting(key, None, Retry.NO, True, side_effect.status_tool)

    async def report(self, scope: str, call_id: str, outcome: OperationOutcome) -> OperationRecord | None:
        return None

    async def status_checked(self, conversation_id: str, tools: tuple[tuple[str, float], ...]) -> None:
        return None


class OperationLog:
    """Operations and their outcomes in the shared cache (see shared_cache.SharedCache)."""

    def __init__(self, cache: Cache, clock: Callable[[], float] = time.time) -> None:
        self._cache = cache
        self._clock = clock

    async def sight(
        self, key: str, tool: str, conversation_id: str, call_id: str, side_effect: SideEffect, *, runs: bool
    ) -> Sighting:
        """Records a call of the operation `key`. `runs`: the call will run even if it is a repeat
        (observe mode), so its outcome may be reported too."""
        now = self._clock()
        window = side_effect.window_seconds
        first = OperationRecord(key, tool, conversation_id, call_id, now, OperationOutcome.UNREPORTED, 1, window)
        retry = Retry.NO
        # The operation, and the call id ReportOutcome will name, in one round trip; the call id only if
        # this is the first call (a refused repeat must never be reportable).
        together = self._cache.keys_together(conversation_id)  # one Cluster slot for the script's two keys
        operation, succeeded = _OPERATION + together + key, _SUCCEEDED + together + key
        call = _CALL + together + call_key(conversation_id, call_id)
        if await self._cache.add_then_set(operation, first, call, key, ttl=window):
            return Sighting(key, None, retry, self._shared, side_effect.status_tool)
        earlier: OperationRecord | None = await self._cache.get(operation, OperationRecord)
        if earlier is None:  # it expired between the two reads: this is the first call after all
            await self._cache.set(operation, first, ttl=window)
            await self._cache.set(call, key, ttl=window)
            return Sighting(key, None, retry, self._shared, side_effect.status_tool)
        earlier = replace(earlier, calls=earlier.calls + 1)
        if earlier.outcome is not OperationOutcome.SUCCEEDED and await self._cache.get(succeeded, bool) is not None:
            # A success reported while another replica rewrote the record (a read, then a write) is kept here.
            earlier = replace(earlier, outcome=OperationOutcome.SUCCEEDED)
        if earlier.outcome is OperationOutcome.FAILED:
            retry = Retry.AFTER_FAILURE
        elif earlier.outcome is not OperationOutcome.SUCCEEDED and side_effect.status_tool:
            checked: float | None = await self._cache.get(_status_key(conversation_id, tool), float)
            if checked is not None and checked >= earlier.seen_at:
                retry = Retry.AFTER_STATUS_CHECK
        if retry is not Retry.NO:  # a genuine retry: it is now the call that may do it
            await self._cache.set(operation, replace(first, calls=earlier.calls), ttl=window)
        else:  # the earlier call stays the one that may have done it; the window runs from now
            await self._cache.set(operation, earlier, ttl=window)
        if retry is not Retry.NO or runs:
            await self._cache.set(call, key, ttl=window)
        return Sighting(key, earlier, retry, self._shared, side_effect.status_tool)

    async def report(self, scope: str, call_id: str, outcome: OperationOutcome) -> OperationRecord | None:
        """Stores a call's outcome on its operation; None when the call is unknown in `scope` (another
        conversation's or session's call id included) or its window passed.

        A success stays: a later report of failure (or of an unknown outcome) for the same operation
        must not let a second refund through.
        """
        together = self._cache.keys_together(scope)
        key: str | None = await self._cache.get(_CALL + together + call_key(scope, call_id), str)
        if key is None:
            return None
        operation, succeeded = _OPERATION + together + key, _SUCCEEDED + together + key
        record: OperationRecord | None = await self._cache.get(operation, OperationRecord)
        if record is None:
            return None
        if outcome is OperationOutcome.SUCCEEDED:
            await self._cache.set(succeeded, True, ttl=record.window)
        elif record.outcome is not OperationOutcome.SUCCEEDED and await self._cache.get(succeeded, bool) is not None:
            record = replace(record, outcome=OperationOutcome.SUCCEEDED)
        if record.outcome is not OperationOutcome.SUCCEEDED:
            record = replace(record, outcome=outcome)
            await self._cache.set(operation, record, ttl=record.window)
        return record

    async def status_checked(self, conversation_id: str, tools: tuple[tuple[str, float], ...]) -> None:
        """The status tool ran in the conversation: a repeat of each of `tools` (name, window) since
        is let through as a retry."""
        now = self._clock()
        for tool, window in tools:
            await self._cache.set(_status_key(conversation_id, tool), now, ttl=window)

    @property
    def _shared(self) -> bool:
        return self._cache.shared_now


def _status_key(conversation_id: str, tool: str) -> str:
    return _STATUS + scoped_name(conversation_id, tool)
