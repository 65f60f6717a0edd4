"""The mode store: the mode document in force on this replica, what every call reads, and who hears of changes.

The mode in force for a tool is, in order: a global override, the tool's
override, the policy's mode. The document (document.py) holds the overrides
and their audit; every change is computed on it by a pure function, then
committed here whole. Every change (set, cleared, expired) is audited, and so
is every refused attempt of a caller who got past the Admin API's
authentication; a caller without a valid token changes nothing durable (its
refusals are counted, not written). Changes and refused attempts are kept
apart, each bounded, so no number of refusals can push a change out.

With a state file (mode_file.py), every audited entry is journalled to it (a
document taken from the fleet is written whole) and it is read back at start,
so a restart never silently puts a tool back into a mode the on-call changed;
an override that expired while the gateway was down is reverted at start, and
the audit says so. The hot path reads one precomputed mapping.

An override of a tool this replica's policy does not have is kept as it is,
never dropped, rewritten or expired here: in a fleet mid-deploy it was set
through a replica on a newer policy, which enforces (and expires) it. It is
listed (`foreign_overrides`), and it takes effect here once a reloaded policy
has the tool.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import (
    AUDIT_KEEP,
    GLOBAL,
    REFUSED_KEEP,
    ModeChange,
    ModeDocument,
    ModeRefused,
    Override,
    OverrideRequest,
    PolicyModes,
    Target,
)
from argwatch.server.modes.merge import missing_from
from argwatch.server.modes.mode_file import ModeFile
from argwatch.server.policy.check_ids import failure_targets, tool_checks
from argwatch.server.policy.model import Failure, Mode, Policy

__all__ = ["AUDIT_KEEP", "GLOBAL", "REFUSED_KEEP", "ModeChange", "ModeRefused", "ModeStore", "Override"]

log = logging.getLogger("argwatch.modes")

ModeListener = Callable[[str, Mode], None]


class ModeStore:
    """Per-tool modes, overrides and their audit; journalled to `state_file` when given."""

    def __init__(
        self,
        policy: Policy,
        global_override: Mode | None = None,
        *,
        state_file: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._tools = _policy_modes(policy)
        self._file = ModeFile(state_file) if state_file is not None else None
        self._listeners: list[ModeListener] = []
        self._document = (self._file.load() if self._file is not None else None) or ModeDocument()
        if global_override is not None:  # the command line wins over a saved global override
            overrides = {**self._document.overrides}
            overrides[Target(GLOBAL)] = Override(global_override, "command line", "--global-mode", clock())
            self._document = replace(self._document, overrides=MappingProxyType(overrides))
        self._effective = doc.in_force(self._document, self._tools)
        self._checks = doc.checks_in_force(self._document, self._tools)
        self._failures = doc.failures_in_force(self._document, self._tools)
        self.expire_due()  # the saved overrides in force first, so an expiry at start says what it reverts from

    # ---- reading

    @property
    def document(self) -> ModeDocument:
        """The mode document in force (immutable: a change replaces it)."""
        return self._document

    @property
    def version(self) -> int:
        return self._document.version

    @property
    def policy_modes(self) -> PolicyModes:
        return self._tools

    @property
    def global_override(self) -> Mode | None:
        found = self._document.override(GLOBAL)
        return found.mode if found else None

    def mode_for(self, tool: str) -> Mode:
        """The mode in force for `tool` (a tool the policy does not know gets the global or default mode)."""
        mode = self._effective.get(tool)
        if mode is not None:
            return mode
        # A tool this policy lacks that an override names (a replica on another policy set it, mid-deploy):
        # that override holds here too, so a tool an on-call put in reject does not pass as UNKNOWN_TOOL
        # under the default observe mode. A look-up only: nothing the caller names is kept.
        found = self._document.override(GLOBAL) or self._document.override(tool)
        return found.mode if found else self._tools.default

    def check_modes(self, tool: str) -> Mapping[str, Mode]:
        """The checks of `tool` an on-call override sets the mode of (by check_ids name); empty for most."""
        return self._checks.get(tool, _NO_CHECKS)

    def failure_overrides(self) -> Mapping[str, Failure]:
        """On-call's failure overrides ("source:orders_db" -> OPEN); a new mapping after every change."""
        return self._failures

    def tool_modes(self) -> Mapping[str, Mode]:
        return self._effective

    def mode_guard(self, tool: str) -> tuple[object, str, object] | None:
        """(this store, the attribute, its value): while that attribute is the same mapping, mode_for(tool)
        answers as it does now, since every change replaces it (edge/native_answers.py re-checks it per
        call). None for a tool it does not hold, whose mode comes from the document's overrides."""
        if tool not in self._effective:
            return None
        return (self, "_effective", self._effective)

    def source_of(self, tool: str) -> tuple[str, Override | None]:
        """Where the tool's mode comes from: ("global", override), ("override", override) or ("policy", None)."""
        return doc.source_in(self._document, tool)

    def foreign_overrides(self) -> dict[str, Override]:
        """Overrides of tools this policy does not have (set through replicas on another policy), by tool."""
        return {
            target.tool: override
            for target, override in self._document.overrides.items()
            if target.tool != GLOBAL and not target.check and target.tool not in self._tools.tools
        }

    def changes(self, limit: int = 100) -> list[ModeChange]:
        """The most recent audit entries (changes and refused attempts), newest first."""
        document = self._document
        merged = heapq.merge(reversed(document.audit), reversed(document.refused), key=lambda c: -c.at)
        return list(itertools.islice(merged, limit))

    def now(self) -> float:
        """The store's clock: the time changes are stamped with, wherever they are computed."""
        return self._clock()

    def has_due(self) -> bool:
        """Whether some override's expiry has passed (a cheap check before expire_due)."""
        return doc.due(self._document, self._tools, self._clock())

    # ---- changing

    def rebind(self, policy: Policy) -> None:
        """Takes a reloaded policy's tools and modes; overrides are kept, whichever tools they name."""
        self._tools = _policy_modes(policy)
        self.commit(self._document, [])

    def set_mode(
        self,
        target: str,
        mode: Mode | None,
        *,
        actor: str,
        reason: str,
        expires_in: float | None = None,
        check: str = "",
    ) -> ModeChange:
        """Sets (mode) or clears (None) the override of `target` (a tool, or GLOBAL), or of one `check` of the
        tool (policy/check_ids.py); raises ModeRefused."""
        request = OverrideRequest(Target(target, check), mode, actor, reason, expires_in)
        document, entry = doc.apply(self._document, request, self._tools, self._clock())
        self.commit(document, [entry])
        if entry.refused:
            raise ModeRefused(entry.outcome.removeprefix("refused: "))
        return entry

    def expire_due(self) -> list[ModeChange]:
        """Reverts every override whose expiry has passed, auditing each; returns the changes."""
        document, entries = doc.expire(self._document, self._tools, self._clock())
        if entries:
            self.commit(document, entries)
        return entries

    def audit(self, change: ModeChange) -> None:
        """Audits an event that is not a mode change (a policy reload, target "@policy")."""
        self.commit(doc.record(self._document, change), [change])

    def record_refusal(self, actor: str, reason: str) -> None:
        """Audits a mode change refused before it was read from an authenticated caller (a read-only token).
        A caller with no valid token is never audited: the interceptor only counts it."""
        entry = refusal_entry(self._clock(), actor, reason)
        self.commit(doc.record(self._document, entry), [entry])

    def adopt(self, document: ModeDocument, added: list[ModeChange] | None = None) -> None:
        """Makes `document` (another replica's, committed to the shared store) the one in force; nothing is
        audited, since its changes were audited where they were made. `added`: its entries the document in
        force lacks, when the caller knows them (a followed head's), so the state file is not compared whole."""
        self.commit(document, [], base=document, adopted=added)

    def subscribe(self, listener: ModeListener) -> None:
        """Calls `listener(tool, mode)` for every tool now and after every change."""
        self._listeners.append(listener)
        for tool, mode in self._effective.items():
            listener(tool, mode)

    def commit(
        self,
        document: ModeDocument,
        entries: list[ModeChange],
        *,
        base: ModeDocument | None = None,
        logged: int | None = None,
        adopted: list[ModeChange] | None = None,
    ) -> None:
        """Puts `document` in force: the mapping every call reads (a new one: readers may hold the old),
        the listeners, the log of `entries` (what it adds to `base`; only the first `logged` of them when
        the rest were logged already), and the state file. A `base` other than the document in force (the
        fleet's newer one) is written whole first, then the entries."""
        if self._file is not None and base is not None and base is not self._document:
            # The fleet's newer document (another replica's changes: in a fleet, most changes). Its entries
            # this one lacks are appended as journal lines, each with its overrides; a whole rewrite (with an
            # fsync, on the event loop) only when it adds none and still differs.
            if adopted is None:  # O(audit): a set of the entries in force
                adopted = missing_from(self._document, base, (AUDIT_KEEP, REFUSED_KEEP))
            if adopted:
                self._file.append(base, adopted)
            else:
                self._file.compact(base)
        self._document = document
        before, self._effective = self._effective, doc.in_force(document, self._tools)
        self._checks = doc.checks_in_force(document, self._tools)
        self._failures = doc.failures_in_force(document, self._tools)
        # The tools whose mode changed, or that are new: a listener hears each tool once, then its changes
        # (10,000 tools told their unchanged modes on every change was most of a change's time).
        changed = [(tool, mode) for tool, mode in self._effective.items() if before.get(tool) is not mode]
        for listener in self._listeners:
            for tool, mode in changed:
                listener(tool, mode)
        for entry in entries[:logged]:
            log.warning(
                "mode change: %s %s -> %s by %s (%s): %s",
                entry.target or "<global>",
                entry.old or "-",
                entry.new or "-",
                entry.actor,
                entry.reason,
                entry.outcome,
            )
        if self._file is not None and entries:
            self._file.append(document, entries)


def refusal_entry(at: float, actor: str, reason: str) -> ModeChange:
    """The audit entry of a change refused before its target was read."""
    return ModeChange(at, actor, "?", "", "", "", None, f"refused: {reason}")


_NO_CHECKS: Mapping[str, Mode] = MappingProxyType({})


def _policy_modes(policy: Policy) -> PolicyModes:
    return PolicyModes(
        MappingProxyType({name: tool.mode for name, tool in policy.tools.items()}),
        policy.default_mode,
        MappingProxyType({name: tool_checks(tool) for name, tool in policy.tools.items()}),
        failure_targets(policy),
    )
