"""Remembers rejected calls, so Repair can explain them and count attempts, in an aiocache cache.

Each rejected call is stored under its call id within its conversation and
session (state/call_scope.py) for `repair.remember`; per conversation and
tool, the number of rejected attempts and the fingerprint of the last rejected
arguments, so a model repeating the same invalid call, or spending its budget,
is told to give up. Values stored are immutable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import orjson

from argwatch.server.policy.model import RepairConfig
from argwatch.server.state.cache import Cache
from argwatch.server.state.call_scope import call_key, scoped_name
from argwatch.server.state.codec import shared_value
from argwatch.server.verdict.findings import Problem
from argwatch.server.verdict.repeats import OperationRecord

_CALL_KEY = "argwatch:rejected:"
_ATTEMPTS_KEY = "argwatch:attempts:"


@shared_value("rejected_call")
@dataclass(frozen=True, slots=True)
class RejectedCall:
    """What Repair needs of a rejected call."""

    call_id: str
    tool: str
    conversation_id: str  # the scope: the conversation bound to its session (state/call_scope.py)
    problems: tuple[Problem, ...]
    attempt: int
    give_up_reason: str
    repeat_of: OperationRecord | None = None  # a refused repeat: the earlier call of its operation
    more_problems: int = 0  # problems past KEPT_PROBLEMS, not kept (the verdict listed them all)


@shared_value("repair_attempts")
@dataclass(frozen=True, slots=True)
class _Attempts:
    count: int
    last_fingerprint: str


def fingerprint(tool: str, arguments: object, raw: bytes) -> str:
    """Identifies "the same call": the tool and its arguments with keys sorted (or the raw text)."""
    try:
        body = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS) if arguments is not None else raw
    except (TypeError, orjson.JSONEncodeError):
        body = raw
    return hashlib.blake2b(tool.encode() + b"\0" + body, digest_size=12).hexdigest()


# What is remembered of one rejected call is bounded, as its ids are: a call inventing 10,000
# arguments has 10,000 problems, listed in its verdict, and only the first few kept for Repair.
KEPT_PROBLEMS = 32


KEPT_CHARS = 512  # of a kept problem's message; its argument and value at most 256 (model text, all three)
KEPT_NAME_CHARS = 1024  # a set's name, a suggested member, what was expected: the policy's and the owner's text
KEPT_ID_CHARS = 256  # an earlier call's ids, for a refused repeat


def _bounded(problem: Problem) -> Problem:
    """The problem as kept for Repair: messages and names cut, as jsonschema puts the whole instance in its."""
    if (
        len(problem.message) <= KEPT_CHARS
        and len(problem.argument) <= 256
        and len(problem.value) <= 256
        and max(len(problem.value_set), len(problem.suggestion), len(problem.expected), len(problem.enum_pointer))
        <= KEPT_NAME_CHARS
    ):
        return problem
    return replace(
        problem,
        message=_cut(problem.message, KEPT_CHARS),
        argument=_cut(problem.argument, 256),
        value=_cut(problem.value, 256),
        value_set=_cut(problem.value_set, KEPT_NAME_CHARS),
        suggestion=_cut(problem.suggestion, KEPT_NAME_CHARS),
        expected=_cut(problem.expected, KEPT_NAME_CHARS),
        enum_pointer=_cut(problem.enum_pointer, KEPT_NAME_CHARS),  # cut, it names no enum: Repair lists none
    )


def within_limits(found: RejectedCall) -> RejectedCall | None:
    """`found` as read back, cut to what the gateway would have kept; None when nothing needed cutting.

    The limits were enforced only when the gateway wrote: a value written into Redis by hand, with the
    right shape and 5,000 problems, made Repair answer 6.2 MB. Read back, the same limits hold.
    """
    kept = tuple(_bounded(problem) for problem in found.problems[:KEPT_PROBLEMS])
    repeat_of = found.repeat_of
    if repeat_of is not None and max(len(repeat_of.call_id), len(repeat_of.key), len(repeat_of.tool)) > KEPT_ID_CHARS:
        repeat_of = replace(
            repeat_of,
            call_id=_cut(repeat_of.call_id, KEPT_ID_CHARS),
            key=_cut(repeat_of.key, KEPT_ID_CHARS),
            tool=_cut(repeat_of.tool, KEPT_ID_CHARS),
            conversation_id="",  # never shown
        )
    cut = (
        len(kept) < len(found.problems)
        or any(a is not b for a, b in zip(kept, found.problems, strict=False))
        or repeat_of is not found.repeat_of
        or max(len(found.tool), len(found.call_id), len(found.give_up_reason)) > KEPT_NAME_CHARS
    )
    if not cut:
        return None
    return replace(
        found,
        tool=_cut(found.tool, KEPT_NAME_CHARS),
        call_id=_cut(found.call_id, KEPT_NAME_CHARS),
        give_up_reason=_cut(found.give_up_reason, KEPT_NAME_CHARS),
        problems=kept,
        repeat_of=repeat_of,
        more_problems=min(max(0, found.more_problems), 1_000_000_000) + len(found.problems) - len(kept),
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RejectionLog:
    """Stores rejected calls and attempt counts in the injected cache."""

    def __init__(self, cache: Cache, config: RepairConfig, on_cut: Callable[[], None] = lambda: None) -> None:
        self._cache = cache
        self._config = config
        self._on_cut = on_cut  # a value read back was over the limits and cut: counted

    async def record(
        self,
        *,
        call_id: str,
        tool: str,
        scope: str,
        problems: tuple[Problem, ...],
        call_fingerprint: str,
        repeat_of: OperationRecord | None = None,
        in_conversation: bool = True,
    ) -> RejectedCall:
        """Stores the rejection in `scope` (the call's conversation bound to its session), and says which
        attempt it is and whether the model should give up (attempts are counted `in_conversation` only)."""
        attempt, reason = 1, ""
        if in_conversation:
            key = _ATTEMPTS_KEY + scoped_name(scope, tool)
            previous: _Attempts | None = await self._cache.get(key, _Attempts)  # never a foreign value
            if previous is not None:
                attempt = previous.count + 1
                if previous.last_fingerprint == call_fingerprint:
                    reason = "it repeated the same invalid call"
            if not reason and attempt >= self._config.max_attempts:
                reason = f"this was attempt {attempt} of {self._config.max_attempts}"
            await self._cache.set(key, _Attempts(attempt, call_fingerprint), ttl=self._config.remember_seconds)
        kept = tuple(_bounded(problem) for problem in problems[:KEPT_PROBLEMS])
        more = max(0, len(problems) - KEPT_PROBLEMS)
        rejected = RejectedCall(call_id, tool, scope, kept, attempt, reason, repeat_of, more)
        await self._cache.set(_CALL_KEY + call_key(scope, call_id), rejected, ttl=self._config.remember_seconds)
        return rejected

    async def find(self, scope: str, call_id: str) -> RejectedCall | None:
        """The call rejected as `call_id` in `scope`; None for another scope's, as for one never seen."""
        found: RejectedCall | None = await self._cache.get(_CALL_KEY + call_key(scope, call_id), RejectedCall)
        if found is None:
            return None
        bounded = within_limits(found)
        if bounded is None:
            return found
        self._on_cut()
        return bounded
