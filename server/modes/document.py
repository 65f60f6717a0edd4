"""The mode state as a pure document: overrides and their audit, changed only by pure functions.

`apply(document, request, tools, now) -> (document, audit entry)` makes or
refuses one change; `expire` reverts what is due; `record` adds an entry that
changes no mode. None of them touches a file, Redis or a clock: the stores of
the document (mode_file.py, fleet.py) and the holder every call reads
(store.py) use them, so a change is computed once, on the copy in force (in a
fleet, Redis's with what only this replica holds added: merge.py), and then
kept or thrown away whole (never rolled back).

An override names a Target: a tool (or every tool, GLOBAL), and optionally a
check below it. Overrides of targets this replica's policy lacks are kept as
they are: in a fleet mid-deploy they were set through a replica on a newer
policy, which enforces (and expires) them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from argwatch.server.policy.model import Failure, Mode

GLOBAL = ""  # the tool of the global override
POLICY_TARGET = "@policy"  # the target of an audit entry about the policy (a reload), not a mode
SHADOW_TARGET = "@shadow"  # the target of an audit entry about the shadow policy (set, cleared, promoted)
AUDIT_KEEP = 10_000  # changes (applied, cleared, expired)
REFUSED_KEEP = 1_000  # refused attempts, kept apart: they can never push a change out
MAX_TEXT = 4096  # a saved string longer than this was not written by argwatch


class ModeRefused(Exception):
    """A mode change that cannot be made; the message says why (and it is audited)."""


class Target(NamedTuple):
    """What an override applies to: a tool (GLOBAL: every tool), and a check below it ("" for the whole tool)."""

    tool: str
    check: str = ""


@dataclass(frozen=True, slots=True)
class Override:
    """An on-call's mode for a target, with who, when, why, and until when."""

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
    check: str = ""  # the check of the tool (policy/check_ids.py: "record:order"), "" for the whole tool

    @property
    def refused(self) -> bool:
        return self.outcome.startswith("refused")


@dataclass(frozen=True, slots=True)
class OverrideRequest:
    """A change asked for: set (mode) or clear (None) the override of a target."""

    target: Target
    mode: Mode | None
    actor: str
    reason: str
    expires_in: float | None = None


@dataclass(frozen=True, slots=True)
class PolicyModes:
    """What the policy says: each tool's mode, the mode of a tool it does not name, and each tool's checks
    an override may name (policy/check_ids.py)."""

    tools: Mapping[str, Mode]
    default: Mode
    checks: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    # The sources, value sets and record kinds a failure override may name ("source:orders_db").
    failures: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ModeDocument:
    """Every override and the audit, at a version bumped by each audited entry; never changed in place."""

    version: int = 0
    overrides: Mapping[Target, Override] = field(default_factory=lambda: MappingProxyType({}))
    audit: tuple[ModeChange, ...] = ()
    refused: tuple[ModeChange, ...] = ()

    def override(self, tool: str, check: str = "") -> Override | None:
        return self.overrides.get(Target(tool, check))

    def entries(self) -> tuple[ModeChange, ...]:
        return (*self.audit, *self.refused)


def source_in(document: ModeDocument, tool: str) -> tuple[str, Override | None]:
    """Where the tool's mode comes from in `document`: ("global", override), ("override", override) or
    ("policy", None)."""
    forced = document.override(GLOBAL)
    if forced is not None:
        return "global", forced
    own = document.override(tool)
    if own is not None:
        return "override", own
    return "policy", None


def in_force(document: ModeDocument, tools: PolicyModes) -> Mapping[str, Mode]:
    """The mode in force per policy tool: the global override, else the tool's override, else the policy's."""
    forced = document.override(GLOBAL)
    if forced is not None:
        return MappingProxyType(dict.fromkeys(tools.tools, forced.mode))
    effective = dict(tools.tools)  # a pass over the few overrides, not a look-up per tool of 10,000
    for target, override in document.overrides.items():
        if not target.check and target.tool in effective:
            effective[target.tool] = override.mode
    return MappingProxyType(effective)


def checks_in_force(document: ModeDocument, tools: PolicyModes) -> Mapping[str, Mapping[str, Mode]]:
    """The check overrides this policy has the checks of, by tool, then check. A check's override decides
    whether that check's problems refuse a call, above the tool's mode in force (global, tool, policy); one
    naming a check this policy lacks is kept (another replica's policy has it) and not applied here."""
    by_tool: dict[str, dict[str, Mode]] = {}
    for target, override in document.overrides.items():
        if target.check and target.check in tools.checks.get(target.tool, ()):
            by_tool.setdefault(target.tool, {})[target.check] = override.mode
    return MappingProxyType({tool: MappingProxyType(checks) for tool, checks in by_tool.items()})


def failures_in_force(document: ModeDocument, tools: PolicyModes) -> Mapping[str, Failure]:
    """The failure overrides this policy has the targets of ("source:orders_db" -> OPEN): a target with no
    tool, its mode read as a failure (observe: fail open, reject: fail closed)."""
    return MappingProxyType(
        {
            target.check: Failure.OPEN if override.mode is Mode.OBSERVE else Failure.CLOSED
            for target, override in document.overrides.items()
            if target.tool == GLOBAL and target.check in tools.failures
        }
    )


def record(document: ModeDocument, entry: ModeChange) -> ModeDocument:
    """The document with one more audited entry (a change, a refusal, or an event such as a reload), in its
    place by time (an entry stamped before another replica's committed, or by a clock behind, is not last;
    among equal times, the last). Every copy is thus in the same order, and cut to its limit the same way:
    merge.py relies on it."""
    if entry.refused:
        return replace(document, version=document.version + 1, refused=_placed(document.refused, entry, REFUSED_KEEP))
    return replace(document, version=document.version + 1, audit=_placed(document.audit, entry, AUDIT_KEEP))


def _placed(entries: tuple[ModeChange, ...], entry: ModeChange, keep: int) -> tuple[ModeChange, ...]:
    if not entries or entries[-1].at <= entry.at:
        return (*entries, entry)[-keep:]
    listed = list(entries)
    bisect.insort(listed, entry, key=_time)
    return tuple(listed[-keep:])


def _time(entry: ModeChange) -> float:
    return entry.at


def apply(
    document: ModeDocument, request: OverrideRequest, tools: PolicyModes, now: float
) -> tuple[ModeDocument, ModeChange]:
    """Makes the change, or refuses it (the refusal is audited too: its entry's outcome says "refused: ...")."""
    target = request.target
    old = described(document, target, tools)
    refusal = _refusal(document, request, tools)
    if refusal:
        new = request.mode.value if request.mode is not None else ""
        entry = ModeChange(
            now, request.actor, target.tool, old, new, request.reason, None, f"refused: {refusal}", target.check
        )
        return record(document, entry), entry
    expires_at = now + request.expires_in if request.expires_in else None
    overrides = dict(document.overrides)
    if request.mode is None:
        overrides.pop(target, None)
        outcome = "cleared"
    else:
        overrides[target] = Override(request.mode, request.actor, request.reason, now, expires_at)
        outcome = "applied"
    changed = replace(document, overrides=MappingProxyType(overrides))
    entry = ModeChange(
        now,
        request.actor,
        target.tool,
        old,
        described(changed, target, tools),
        request.reason,
        expires_at,
        outcome,
        target.check,
    )
    return record(changed, entry), entry


def due(document: ModeDocument, tools: PolicyModes, now: float) -> bool:
    """Whether an override of this policy's (or the global one) has passed its expiry."""
    return any(
        override.expires_at is not None and override.expires_at <= now and _ours(target, tools)
        for target, override in document.overrides.items()
    )


def expire(document: ModeDocument, tools: PolicyModes, now: float) -> tuple[ModeDocument, list[ModeChange]]:
    """Reverts every override of this policy's whose expiry has passed, auditing each."""
    expiring = [
        (target, override, described(document, target, tools))
        for target, override in document.overrides.items()
        if override.expires_at is not None and override.expires_at <= now and _ours(target, tools)
    ]
    if not expiring:
        return document, []
    gone = {target for target, _, _ in expiring}
    after = replace(
        document,
        overrides=MappingProxyType({t: o for t, o in document.overrides.items() if t not in gone}),
    )
    entries = []
    for target, override, old in expiring:
        reason = f"override by {override.actor} expired ({override.reason})"
        new = described(after, target, tools)
        entry = ModeChange(now, "argwatch", target.tool, old, new, reason, None, "expired", target.check)
        after = record(after, entry)
        entries.append(entry)
    return after, entries


def described(document: ModeDocument, target: Target, tools: PolicyModes) -> str:
    """The mode in force for a target, in words ("" for no global override, or another replica's tool)."""
    if target.tool == GLOBAL and target.check:  # a failure override: its mode read as a failure
        own = document.overrides.get(target)
        return ("open" if own.mode is Mode.OBSERVE else "closed") if own else ""
    if target.tool == GLOBAL or target.tool not in tools.tools or target.check:
        own = document.overrides.get(target)
        return own.mode.value if own else ""
    return in_force(document, tools)[target.tool].value


def _ours(target: Target, tools: PolicyModes) -> bool:
    """Whether this replica's policy has the target (a tool, one of its checks, or global): only those expire
    here; another replica's policy has the rest, and expires them."""
    if target.check:
        if target.tool == GLOBAL:
            return target.check in tools.failures
        return target.check in tools.checks.get(target.tool, ())
    return target.tool == GLOBAL or target.tool in tools.tools


def _refusal(document: ModeDocument, request: OverrideRequest, tools: PolicyModes) -> str:
    target = request.target
    # Clearing an override of a tool this policy lacks is allowed: on-call can always undo one.
    clearing = request.mode is None
    if target.check and target.tool == GLOBAL:  # a failure override: a source, a value set or a record kind
        if target.check not in tools.failures and not (clearing and target in document.overrides):
            named = sorted(tools.failures)
            return (
                f"the policy has no {target.check!r} (a failure override names a source, a set or a record "
                f"kind: {', '.join(named[:20]) or 'none'}{', ...' if len(named) > 20 else ''})"
            )
    elif target.check:
        known = tools.checks.get(target.tool)
        if target.check not in (known or ()) and not (clearing and target in document.overrides):
            if known is None:
                return f"the policy has no tool {target.tool!r}"
            return f"{target.tool} has no check {target.check!r}; its checks: {', '.join(sorted(known)) or 'none'}"
    if target.tool != GLOBAL and target.tool not in tools.tools and not (clearing and target in document.overrides):
        return f"the policy has no tool {target.tool!r}"
    if not request.reason.strip():
        return "a reason is required"
    if request.expires_in is not None and request.expires_in < 0:
        return "the expiry must be in the future"
    return ""


# ---- as JSON (the state file's lines and Redis' value)


def to_json(document: ModeDocument, audit_keep: int = AUDIT_KEEP, refused_keep: int = REFUSED_KEEP) -> dict[str, Any]:
    """The document as JSON-able data, with the newest audit entries and refusals up to the limits given."""
    data: dict[str, Any] = {
        "version": document.version,
        "overrides": overrides_to_json(document.overrides),
        "audit": [change_to_json(entry) for entry in document.audit[-audit_keep:]] if audit_keep else [],
        "refused": [change_to_json(entry) for entry in document.refused[-refused_keep:]] if refused_keep else [],
    }
    below = [
        {"tool": target.tool, "check": target.check, **_override_json(override)}
        for target, override in document.overrides.items()
        if target.check
    ]
    if below:  # only then: a document without them reads as it did before they existed
        data["check_overrides"] = below
    return data


def overrides_to_json(overrides: Mapping[Target, Override]) -> dict[str, dict[str, Any]]:
    """The whole-tool overrides, by tool (the format before checks could be overridden)."""
    return {target.tool: _override_json(o) for target, o in overrides.items() if not target.check}


def change_to_json(entry: ModeChange) -> dict[str, Any]:
    """An audited change as saved: what asdict makes, written out (asdict copies every field deeply, and a
    fleet's document is rewritten whole, a thousand entries, with every change)."""
    return {
        "at": entry.at,
        "actor": entry.actor,
        "target": entry.target,
        "old": entry.old,
        "new": entry.new,
        "reason": entry.reason,
        "expires_at": entry.expires_at,
        "outcome": entry.outcome,
        "check": entry.check,
    }


def from_json(data: object, entries: list[ModeChange] | None = None) -> ModeDocument:
    """The document `data` describes; TypeError or ValueError naming the field that is not what argwatch writes.
    `entries`: its audit entries and refusals read already (shared_reader.py), in place of data's."""
    if not isinstance(data, dict):
        raise TypeError("expected an object")
    version = whole_number(data.get("version", 0), "version")
    overrides = overrides_from_json(data.get("overrides", {}))
    for entry in _list(data.get("check_overrides", []), "check_overrides"):
        if not isinstance(entry, dict):
            raise TypeError("check_overrides: expected objects")
        target = Target(_text(entry.get("tool"), "check_overrides.tool"), _text(entry.get("check"), "check"))
        overrides[target] = _override(entry, f"check_overrides.{target.tool}")
    if entries is None:
        entries = [change_from_json(entry) for _, listed in entry_lists(data) for entry in listed]
    return with_entries(ModeDocument(version, MappingProxyType(overrides)), entries)


def with_entries(document: ModeDocument, entries: list[ModeChange]) -> ModeDocument:
    """The document with these audit entries, sorted into changes and refusals by time (older state kept
    refusals in the audit too), each list cut to its limit."""
    audit = sorted((entry for entry in entries if not entry.refused), key=_time)
    refused = sorted((entry for entry in entries if entry.refused), key=_time)
    return replace(document, audit=tuple(audit[-AUDIT_KEEP:]), refused=tuple(refused[-REFUSED_KEEP:]))


def overrides_from_json(saved: object) -> dict[Target, Override]:
    """Whole-tool overrides as saved, kept whatever tool they name: one this policy lacks is another replica's."""
    if not isinstance(saved, dict):
        raise TypeError("overrides: expected an object")
    return {Target(_text(tool, "overrides")): _override(entry, f"overrides.{tool}") for tool, entry in saved.items()}


def change_from_json(entry: object) -> ModeChange:
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
        check=_text(entry.get("check", ""), "check"),
    )


def _override_json(override: Override) -> dict[str, Any]:
    return {**asdict(override), "mode": override.mode.value}


def _override(entry: object, where: str) -> Override:
    if not isinstance(entry, dict):
        raise TypeError(f"{where}: expected an object")
    try:
        mode = Mode(entry["mode"])
    except ValueError:
        raise ValueError(f"{where}.mode: expected observe or reject, got {entry['mode']!r}") from None
    expires = entry.get("expires_at")
    return Override(
        mode,
        _text(entry["actor"], "actor"),
        _text(entry["reason"], "reason"),
        _number(entry["set_at"], "set_at"),
        None if expires is None else _number(expires, "expires_at"),
    )


def entry_lists(data: dict[str, Any]) -> tuple[tuple[str, list[Any]], ...]:
    """The document's lists of audit entries and of refusals, by key; TypeError when one is not a list."""
    return tuple((key, _list(data.get(key, []), key)) for key in ("audit", "refused"))


def _list(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{field}: expected a list")
    return value


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise TypeError(f"{field}: expected a string of at most {MAX_TEXT} characters")
    return value


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TypeError(f"{field}: expected a number")
    return float(value)


def whole_number(value: object, field: str) -> int:
    """`value` if it is an int (not a bool); TypeError naming `field` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field}: expected a whole number")
    return value
