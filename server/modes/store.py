"""The mode store: each tool's mode, on-call overrides (per tool or global, optionally expiring), and their audit.

The mode in force for a tool is, in order: a global override, the tool's
override, the policy's mode. Every change (set, cleared, expired) is appended
to the audit trail, and so is every refused attempt of a caller who got past
the Admin API's authentication; a caller without a valid token changes
nothing durable (its refusals are counted, not written). Changes and refused
attempts are kept apart, each bounded, so no number of refusals can push a
change out of the trail.

With a state file, each audited entry is one line appended to it (a JSON line
with the overrides in force after it), never a rewrite of the whole file on
the event loop; it is compacted, atomically, when it has grown to twice what is
kept. It is read back at start, so a restart never silently puts a tool back
into a mode the on-call changed; an override that expired while the gateway
was down is reverted at start, and the audit says so. A state file written
before the journal (one JSON document) is read too. The hot path reads one
precomputed mapping.

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
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

import orjson

from argwatch.common.files import MODE_STATE_BYTES, read_file
from argwatch.server.policy.model import Mode, Policy
from argwatch.server.state.atomic_file import remove_leftovers, write_atomically

log = logging.getLogger("argwatch.modes")

ModeListener = Callable[[str, Mode], None]
GLOBAL = ""  # the target of the global override
AUDIT_KEEP = 10_000  # changes (applied, cleared, expired)
REFUSED_KEEP = 1_000  # refused attempts, kept apart: they can never push a change out


@dataclass(frozen=True, slots=True)
class Override:
    """An on-call's mode for a tool (or for every tool), with who, when, why, and until when."""

    mode: Mode
    actor: str
    reason: str
    set_at: float
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class ModeChange:
    """One line of the audit trail."""

    at: float
    actor: str
    target: str  # a tool name, or "" for the global override
    old: str  # the mode in force before ("observe", "reject"; "" for no global override)
    new: str
    reason: str
    expires_at: float | None
    outcome: str  # "applied", "cleared", "expired", "refused: <why>"


class ModeRefused(Exception):
    """A mode change that cannot be made; the message says why (and it is audited)."""


class ModeStore:
    """Per-tool modes, overrides and their audit; persisted to `state_file` when given."""

    def __init__(
        self,
        policy: Policy,
        global_override: Mode | None = None,
        *,
        state_file: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._policy_modes: Mapping[str, Mode] = {}
        self._default = policy.default_mode
        self._bind(policy)
        self._state_file = state_file
        self._clock = clock
        self._overrides: dict[str, Override] = {}
        self._audit: list[ModeChange] = []
        self._refused: list[ModeChange] = []
        self._journal_lines = 0  # lines in the state file since it was last compacted
        self._listeners: list[ModeListener] = []
        # Bumped by every audited change; with a shared store, the newer of two states wins.
        self.version = 0
        if state_file is not None:
            remove_leftovers(state_file)  # of compactions a killed process left half-written
            self._load(state_file)
        if global_override is not None:  # the command line wins over a saved global override
            self._overrides[GLOBAL] = Override(global_override, "command line", "--global-mode", clock())
        self._effective: Mapping[str, Mode] = {}
        self._recompute()  # the saved overrides in force, so an expiry at start says what it reverts from
        self.expire_due()

    # ---- reading

    @property
    def global_override(self) -> Mode | None:
        found = self._overrides.get(GLOBAL)
        return found.mode if found else None

    def mode_for(self, tool: str) -> Mode:
        """The mode in force for `tool` (a tool the policy does not know gets the global or default mode)."""
        mode = self._effective.get(tool)
        if mode is not None:
            return mode
        # A tool this policy lacks that an override names (a replica on another policy set it, mid-deploy):
        # that override holds here too, so a tool an on-call put in reject does not pass as UNKNOWN_TOOL
        # under the default observe mode. A look-up only: nothing the caller names is kept.
        found = self._overrides.get(GLOBAL) or self._overrides.get(tool)
        return found.mode if found else self._default

    def tool_modes(self) -> Mapping[str, Mode]:
        return self._effective

    def source_of(self, tool: str) -> tuple[str, Override | None]:
        """Where the tool's mode comes from: ("global", override), ("override", override) or ("policy", None)."""
        if GLOBAL in self._overrides:
            return "global", self._overrides[GLOBAL]
        if tool in self._overrides:
            return "override", self._overrides[tool]
        return "policy", None

    def foreign_overrides(self) -> dict[str, Override]:
        """Overrides of tools this policy does not have (set through replicas on another policy), by tool."""
        return {
            target: override
            for target, override in self._overrides.items()
            if target != GLOBAL and target not in self._policy_modes
        }

    def rebind(self, policy: Policy) -> None:
        """Takes a reloaded policy's tools and modes; overrides are kept, whichever tools they name."""
        self._bind(policy)
        self._recompute()

    def changes(self, limit: int = 100) -> list[ModeChange]:
        """The most recent audit entries (changes and refused attempts), newest first."""
        merged = heapq.merge(reversed(self._audit), reversed(self._refused), key=lambda c: -c.at)
        return list(itertools.islice(merged, limit))

    # ---- changing

    def set_mode(
        self, target: str, mode: Mode | None, *, actor: str, reason: str, expires_in: float | None = None
    ) -> ModeChange:
        """Sets (mode) or clears (None) the override of `target` (a tool, or GLOBAL); raises ModeRefused."""
        now = self._clock()
        old = self._described(target)
        refusal = self._refusal(target, reason, expires_in, clearing=mode is None)
        if refusal:
            self._record(ModeChange(now, actor, target, old, _name(mode), reason, None, f"refused: {refusal}"))
            raise ModeRefused(refusal)
        expires_at = now + expires_in if expires_in else None
        if mode is None:
            self._overrides.pop(target, None)
            outcome = "cleared"
        else:
            self._overrides[target] = Override(mode, actor, reason, now, expires_at)
            outcome = "applied"
        self._recompute()
        change = ModeChange(now, actor, target, old, self._described(target), reason, expires_at, outcome)
        self._record(change)
        return change

    def has_due(self) -> bool:
        """Whether some override's expiry has passed (a cheap check before expire_due)."""
        now = self._clock()
        return any(
            o.expires_at is not None and o.expires_at <= now and self._ours(target)
            for target, o in self._overrides.items()
        )

    def export(self, audit_keep: int = AUDIT_KEEP, refused_keep: int = REFUSED_KEEP) -> dict[str, object]:
        """The state as a JSON-able document: version, overrides, the newest changes and refused attempts."""
        return {
            "version": self.version,
            "overrides": self._overrides_document(),
            "audit": [asdict(change) for change in self._audit[-audit_keep:]],
            "refused": [asdict(change) for change in self._refused[-refused_keep:]],
        }

    def adopt(self, document: Mapping[str, object]) -> None:
        """Replaces the state with `document` (from export, possibly another replica's); nothing is audited,
        since the changes were audited where they were made."""
        self._read_document(document)
        self.version = int(document.get("version", 0))  # type: ignore[call-overload]
        self._recompute()
        if self._state_file is not None:
            self._compact(self._state_file)  # another replica's changes: rare, so a whole rewrite is fine

    @staticmethod
    def check_document(document: object) -> None:
        """Raises (TypeError, ValueError, KeyError) unless `document` has the shape export() gives."""
        if not isinstance(document, dict) or not isinstance(document.get("version"), int):
            raise ValueError("not a mode state document")
        overrides = document.get("overrides", {})
        if not isinstance(overrides, dict):
            raise TypeError("overrides: not a mapping")
        for saved in overrides.values():
            Override(Mode(saved["mode"]), str(saved["actor"]), str(saved["reason"]), float(saved["set_at"]))
        for key in ("audit", "refused"):
            for entry in document.get(key, []):
                change = ModeChange(**entry)
                float(change.at)
                if not all(isinstance(text, str) for text in (change.actor, change.target, change.outcome)):
                    raise TypeError(f"{key}: an entry whose actor, target or outcome is not text")

    def audit(self, change: ModeChange) -> None:
        """Audits an event that is not a mode change (a policy reload, target "@policy")."""
        self._record(change)

    def record_refusal(self, actor: str, reason: str) -> None:
        """Audits a mode change refused before it was read from an authenticated caller (a read-only token).
        A caller with no valid token is never audited: the interceptor only counts it."""
        self._record(ModeChange(self._clock(), actor, "?", "", "", "", None, f"refused: {reason}"))

    def expire_due(self) -> list[ModeChange]:
        """Reverts every override whose expiry has passed, auditing each; returns the changes."""
        now = self._clock()
        due = [
            (target, override, self._described(target))
            for target, override in self._overrides.items()
            if override.expires_at is not None and override.expires_at <= now and self._ours(target)
        ]
        if not due:
            return []
        for target, _, _ in due:
            del self._overrides[target]
        self._recompute()  # before describing: the audit must say what is in force now
        expired = [
            ModeChange(
                now,
                "argwatch",
                target,
                old,
                self._described(target),
                f"override by {override.actor} expired ({override.reason})",
                None,
                "expired",
            )
            for target, override, old in due
        ]
        for change in expired:
            self._record(change)
        return expired

    def subscribe(self, listener: ModeListener) -> None:
        """Calls `listener(tool, mode)` for every tool now and after every change."""
        self._listeners.append(listener)
        for tool, mode in self._effective.items():
            listener(tool, mode)

    # ---- internals

    def _bind(self, policy: Policy) -> None:
        self._policy_modes = {name: tool.mode for name, tool in policy.tools.items()}
        self._default = policy.default_mode

    def _ours(self, target: str) -> bool:
        """Whether this replica's policy has `target` (or it is the global override): only those expire here."""
        return target == GLOBAL or target in self._policy_modes

    def _refusal(self, target: str, reason: str, expires_in: float | None, clearing: bool = False) -> str:
        # Clearing an override of a tool this policy lacks is allowed: on-call can always undo one.
        if target != GLOBAL and target not in self._policy_modes and not (clearing and target in self._overrides):
            return f"the policy has no tool {target!r}"
        if not reason.strip():
            return "a reason is required"
        if expires_in is not None and expires_in < 0:
            return "the expiry must be in the future"
        return ""

    def _described(self, target: str) -> str:
        if target == GLOBAL:
            found = self._overrides.get(GLOBAL)
            return found.mode.value if found else ""
        if target not in self._policy_modes:  # another replica's tool: only its override is known here
            own = self._overrides.get(target)
            return own.mode.value if own else ""
        return self._effective[target].value

    def _recompute(self) -> None:
        forced = self._overrides.get(GLOBAL)
        effective = {}
        for tool, mode in self._policy_modes.items():
            own = self._overrides.get(tool)
            effective[tool] = forced.mode if forced else own.mode if own else mode
        # A new mapping, never mutated in place: readers may hold the old one.
        self._effective = MappingProxyType(effective)
        for listener in self._listeners:
            for tool, mode in effective.items():
                listener(tool, mode)

    def _record(self, change: ModeChange) -> None:
        self.version += 1
        if change.outcome.startswith("refused"):
            self._refused.append(change)
            del self._refused[:-REFUSED_KEEP]
        else:
            self._audit.append(change)
            del self._audit[:-AUDIT_KEEP]
        log.warning(
            "mode change: %s %s -> %s by %s (%s): %s",
            change.target or "<global>",
            change.old or "-",
            change.new or "-",
            change.actor,
            change.reason,
            change.outcome,
        )
        if self._state_file is not None:
            self._append(self._state_file, change)

    def _overrides_document(self) -> dict[str, dict[str, Any]]:
        return {target: {**asdict(o), "mode": o.mode.value} for target, o in self._overrides.items()}

    def _append(self, path: str, change: ModeChange) -> None:
        """One line: the change, and the overrides in force after it. An append of a few hundred bytes
        (no fsync: a killed process loses nothing the kernel has; the compaction syncs)."""
        if self._journal_lines >= 2 * (AUDIT_KEEP + REFUSED_KEEP):
            self._compact(path)
        line = {"version": self.version, "change": asdict(change), "overrides": self._overrides_document()}
        with open(path, "ab") as handle:
            handle.write(orjson.dumps(line) + b"\n")
        self._journal_lines += 1

    def _compact(self, path: str) -> None:
        """The journal rewritten, atomically, as one line holding what is kept."""
        write_atomically(path, orjson.dumps({"version": self.version, "snapshot": self.export()}) + b"\n")
        self._journal_lines = 1

    def _load(self, path: str) -> None:
        try:
            raw = read_file(path, MODE_STATE_BYTES)
        except FileNotFoundError:
            return
        except OSError as error:
            # Refuse rather than guess: starting without the on-call's overrides would silently undo them.
            raise ModeRefused(f"cannot read the mode state file {path}: {error.strerror}") from None
        lines: list[tuple[int, dict[str, Any]]] = []
        unreadable = 0
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError:
                unreadable += 1  # cut by a crash or a full disk mid-append: the lines around it stand
                continue
            if not isinstance(parsed, dict):
                raise ModeRefused(f"the mode state file {path}, line {number}: expected a JSON object")
            lines.append((number, parsed))
        if unreadable and not lines:
            # Refuse rather than guess: starting without the on-call's overrides would silently undo them.
            raise ModeRefused(f"cannot read the mode state file {path}: no line of it is JSON")
        if unreadable:
            log.warning("mode state file %s: ignoring %d unreadable line(s) (cut mid-write)", path, unreadable)
        changes: list[ModeChange] = []
        overrides: dict[str, Override] = {}
        version = 0
        for number, entry in lines:
            # A line of the right JSON but the wrong shape was written by hand (or by someone else): refused,
            # naming where, rather than a traceback or a guess.
            try:
                if "change" in entry:  # a journal line
                    changes.append(_change(entry["change"]))
                    overrides = _overrides(entry["overrides"])
                else:  # a compacted snapshot, or the whole file in the format before the journal
                    snapshot = entry.get("snapshot", entry)
                    if not isinstance(snapshot, dict):
                        raise TypeError("snapshot: expected an object")
                    kept = [*snapshot.get("audit", []), *snapshot.get("refused", [])]
                    changes = [_change(entry) for entry in kept]
                    overrides = _overrides(snapshot.get("overrides", {}))
                version = _whole(entry.get("version", 0), "version")
            except (KeyError, TypeError, ValueError) as error:
                what = f"missing {error}" if isinstance(error, KeyError) else str(error)
                raise ModeRefused(f"the mode state file {path}, line {number}: {what}") from None
        self._take(overrides, changes)
        self.version = version or len(self._audit)
        self._journal_lines = len(lines)

    def _read_document(self, document: Mapping[str, Any]) -> None:
        """The state export() gives (another replica's, checked by check_document first)."""
        entries = [_change(entry) for entry in [*document.get("audit", []), *document.get("refused", [])]]
        self._take(_overrides(document.get("overrides", {})), entries)

    def _take(self, overrides: dict[str, Override], changes: list[ModeChange]) -> None:
        self._overrides = overrides
        # Older state put refused attempts in the audit too: sort them out, each list by time.
        self._audit = sorted((c for c in changes if not c.outcome.startswith("refused")), key=lambda c: c.at)
        self._refused = sorted((c for c in changes if c.outcome.startswith("refused")), key=lambda c: c.at)
        del self._audit[:-AUDIT_KEEP]
        del self._refused[:-REFUSED_KEEP]


def _change(entry: object) -> ModeChange:
    """An audited change as saved; TypeError or ValueError naming the field that is not what was written."""
    if not isinstance(entry, dict):
        raise TypeError("a change: expected an object")
    expires = entry.get("expires_at")
    return ModeChange(
        at=_number(entry["at"], "at"),
        actor=_text(entry["actor"], "actor"),
        target=_text(entry["target"], "target"),
        old=_text(entry["old"], "old"),
        new=_text(entry["new"], "new"),
        reason=_text(entry["reason"], "reason"),
        expires_at=None if expires is None else _number(expires, "expires_at"),
        outcome=_text(entry["outcome"], "outcome"),
    )


def _overrides(saved: object) -> dict[str, Override]:
    """Overrides as saved, kept whatever tool they name: one this policy lacks is another replica's."""
    if not isinstance(saved, dict):
        raise TypeError("overrides: expected an object")
    overrides: dict[str, Override] = {}
    for target, entry in saved.items():
        if not isinstance(entry, dict):
            raise TypeError(f"overrides.{target}: expected an object")
        expires = entry.get("expires_at")
        try:
            mode = Mode(entry["mode"])
        except ValueError:
            raise ValueError(f"overrides.{target}.mode: expected observe or reject, got {entry['mode']!r}") from None
        overrides[_text(target, "overrides")] = Override(
            mode,
            _text(entry["actor"], "actor"),
            _text(entry["reason"], "reason"),
            _number(entry["set_at"], "set_at"),
            None if expires is None else _number(expires, "expires_at"),
        )
    return overrides


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or len(value) > 4096:
        raise TypeError(f"{field}: expected a string of at most 4096 characters")
    return value


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TypeError(f"{field}: expected a number")
    return float(value)


def _whole(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field}: expected a whole number")
    return value


def _name(mode: Mode | None) -> str:
    return mode.value if mode is not None else ""
