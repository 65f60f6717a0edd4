"""A loaded shadow policy and its own parts: a Validator whose judgment changes nothing outside itself.

The parts are built by the process (process/shadow_parts.py), each private to
the shadow: metrics on a registry nobody scrapes, no sampled log, no offender
table, no rejection log, no repair tracking, no memory of operations (so no
repeat check: docs/policy.md), no decision log. Its value sets are its own
provider's, which starts from the live provider's copies of every set
configured the same and then follows the sources itself. Its modes are a
store of its own that takes the live store's document (the on-call's
overrides) whenever that changes, read against the shadow policy's own modes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.model import Policy
from argwatch.server.records.lookup_client import RecordClient
from argwatch.server.validator import Validator
from argwatch.server.valuesets.provider import ValueSetProvider


@dataclass
class ShadowJudge:
    """One shadow policy, ready to judge calls."""

    policy: Policy
    name: str  # where it came from: a file's path, or the name SetShadowPolicy was given
    validator: Validator
    provider: ValueSetProvider
    record_clients: Mapping[str, RecordClient]
    modes: ModeStore  # the shadow's own, following the live store's document (follow_overrides)

    def follow_overrides(self, live: ModeStore) -> None:
        """The on-call's overrides in force on the live policy apply to the shadow too (an identity check
        per call; the shadow's mode maps are recomputed only when the live document changed)."""
        document = live.document
        if self.modes.document is not document:
            self.modes.adopt(document)

    def unavailable_sets(self) -> tuple[str, ...]:
        """The shadow's sets it has no copy of to check against now (its checks of them fail open or closed)."""
        return tuple(name for name in self.policy.value_sets if self.provider.read(name) is None)

    async def close(self) -> None:
        await self.provider.close()
        for client in self.record_clients.values():
            await client.close()
