"""Calls counted per tool and refusal signature, bounded, for the preview of a mode change over a window.

One dictionary increment a call: a call with no problem counts under the
empty signature, so a tool's signatures sum to its calls. The signatures a
caller can produce are combinations of the policy's checks and a fixed set of
causes, still far too many to keep them all: each tool keeps at most
MAX_PER_TOOL distinct signatures and the gateway MAX_TOTAL, and a call whose
signature did not fit counts under NOT_KEPT, which a preview reports as not
previewed rather than guess. A signature no call has had for the longest
window a preview reads is forgotten (IDLE_SECONDS, by the windows that copy
these counts), so the bounds hold over what is happening now: a tool's slots
filled by combinations seen long ago are free again for the next outage's.
"""

from __future__ import annotations

from collections.abc import Mapping

from argwatch.server.verdict.call_signature import Signature

MAX_PER_TOOL = 64
MAX_TOTAL = 16_384
IDLE_SECONDS = 900.0  # the longest window a preview reads: a signature idle that long counts in none
NOT_KEPT: Signature = frozenset({("", "not_kept", False)})

SignatureKey = tuple[str, Signature]  # (tool, signature)


class CallSignatures:
    """Cumulative calls per (tool, signature); read by a CountWindows for the 1 and 15 minute windows."""

    def __init__(self, max_per_tool: int = MAX_PER_TOOL, max_total: int = MAX_TOTAL) -> None:
        self._counts: dict[SignatureKey, int] = {}
        self._per_tool: dict[str, int] = {}
        self._max_per_tool = max_per_tool
        self._max_total = max_total

    def count(self, tool: str, signature: Signature) -> None:
        key = (tool, signature)
        counts = self._counts
        value = counts.get(key)
        if value is not None:
            counts[key] = value + 1
            return
        kept = self._per_tool.get(tool, 0)
        if kept >= self._max_per_tool or len(counts) >= self._max_total:
            key = (tool, NOT_KEPT)
            counts[key] = counts.get(key, 0) + 1
            return
        self._per_tool[tool] = kept + 1
        counts[key] = 1

    def kept_count(self, tool: str, signature: Signature) -> tuple[dict[SignatureKey, int], SignatureKey]:
        """(the live counts, the key): count(tool, signature) of a key the counts hold is `counts[key] += 1`,
        which edge/native_answers.py does itself; of a key they do not hold, it leaves the call to count().
        A key they hold is put back under the object returned (its count kept, only its place in their order
        moves): a look-up with it is then decided by identity, with no comparison of the tuples."""
        key = (tool, signature)
        counts = self._counts
        held = counts.pop(key, None)
        if held is not None:
            counts[key] = held
        return counts, key

    def forget(self, keys: list[SignatureKey]) -> None:
        """Drops these signatures (no call had them for IDLE_SECONDS), freeing their tools' slots."""
        for key in keys:
            if self._counts.pop(key, None) is None or key[1] == NOT_KEPT:
                continue
            tool = key[0]
            left = self._per_tool.get(tool, 0) - 1
            if left > 0:
                self._per_tool[tool] = left
            else:
                self._per_tool.pop(tool, None)

    def counts(self) -> Mapping[SignatureKey, int]:
        """The cumulative counts (the live mapping: the windows copy it)."""
        return self._counts
