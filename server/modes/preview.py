"""What a mode change would have done: each counted call decided under the modes now and after the change.

The gateway keeps, per tool, its calls by refusal signature over the last
hour (telemetry/call_signatures.py). A preview applies the change to a copy of
the mode document (nothing is committed or audited), then decides every
signature twice, under the modes in force now and under the copy, exactly as
the Validator decides a call: a problem refuses when its check's mode is
reject, and a check that could not run is a problem only where it fails
closed. The calls decided differently are counted by cause.

A call judged in observe because it read a stale set with `on_stale:
observe` is decided so again (its signature says so), whatever the tool's
mode; calls naming a tool the policy lacks are counted together (UNKNOWN_TOOLS)
and decided under the global override, else the policy's default, as the
Validator's mode_for does. One thing a signature does not carry is left as it
is: the repeat check of a call newly let through (the gateway checks repeats
only on calls it lets through, so such a call's repeat was never looked for).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import GLOBAL, ModeDocument, OverrideRequest, PolicyModes, Target
from argwatch.server.policy.check_ids import (
    ARG,
    RECORD,
    RECORD_KIND,
    REPEAT_CHECK,
    SOURCE,
    VALUE_SET,
    record_failure,
    set_failure,
    tool_checks,
)
from argwatch.server.policy.model import ArgumentBinding, Failure, Mode, Policy, RecordBinding, ToolPolicy
from argwatch.server.telemetry.call_signatures import NOT_KEPT, SignatureKey
from argwatch.server.telemetry.metrics import UNKNOWN_LABEL
from argwatch.server.verdict.call_signature import JUDGED_STALE, Signature

UNKNOWN_TOOLS = UNKNOWN_LABEL  # the calls naming a tool the policy lacks, whatever name they sent

MAX_TOOLS_LISTED = 20
MAX_PROTECTIONS = 50


@dataclass(slots=True)
class WindowPreview:
    """What the change would have done over one window."""

    window_seconds: int
    covered_seconds: float
    calls: int = 0
    refused_now: int = 0
    newly_allowed: int = 0
    newly_allowed_by_cause: dict[str, int] = field(default_factory=dict)
    newly_refused: int = 0
    newly_refused_by_cause: dict[str, int] = field(default_factory=dict)
    not_previewed: int = 0

    def absorb(self, other: WindowPreview) -> None:
        self.calls += other.calls
        self.refused_now += other.refused_now
        self.newly_allowed += other.newly_allowed
        self.newly_refused += other.newly_refused
        self.not_previewed += other.not_previewed
        for cause, calls in other.newly_allowed_by_cause.items():
            self.newly_allowed_by_cause[cause] = self.newly_allowed_by_cause.get(cause, 0) + calls
        for cause, calls in other.newly_refused_by_cause.items():
            self.newly_refused_by_cause[cause] = self.newly_refused_by_cause.get(cause, 0) + calls


@dataclass(frozen=True, slots=True)
class Protection:
    """A check the change stops enforcing, or lets fail open."""

    kind: str  # "ownership", "fail_closed", "repeat" or "check" (policy order of seriousness)
    security: bool
    tool: str
    check: str
    text: str


@dataclass(slots=True)
class Preview:
    target: Target
    before: str  # the target's mode in words now, and after the change (document.described)
    after: str
    expires_in: float | None
    tools: tuple[str, ...]  # the tools the change touches, in policy order
    windows: list[WindowPreview]
    by_tool: dict[str, list[WindowPreview]]
    protections: list[Protection]
    protections_left_off: int
    clearing: bool = False  # the change clears an override rather than sets one
    # A touched tool with side effects whose repeat check refuses after the change: a call it would let
    # through may still be refused as a repeat, which was never looked for (only let-through calls are).
    repeats_unchecked: bool = False

    @property
    def changes_anything(self) -> bool:
        return bool(self.protections) or any(w.newly_allowed or w.newly_refused for w in self.windows)


Window = tuple[int, float, Mapping[SignatureKey, int]]  # (seconds asked, seconds covered, counts)

KIND_ORDER = ("ownership", "fail_closed", "repeat", "check")
# Issue 29: ownership, fail-closed checks, and the repeat check (only a tool with side effects has one).
SECURITY_KINDS = ("ownership", "fail_closed", "repeat")


class ResolvedModes:
    """The modes one mode document puts in force: per tool, per check, and each check's failure."""

    def __init__(self, policy: Policy, document: ModeDocument, tools: PolicyModes) -> None:
        self._policy = policy
        self._modes = doc.in_force(document, tools)
        self._checks = doc.checks_in_force(document, tools)
        self._failures = doc.failures_in_force(document, tools)
        forced = document.override(GLOBAL)
        # A tool the policy lacks: the global override, else the policy's default (ModeStore.mode_for).
        self._default = forced.mode if forced is not None else tools.default

    def enforced(self, tool: str, check: str, stale: bool = False) -> bool:
        """Whether a problem found by `check` of `tool` refuses the call; `stale`: the call was judged in
        observe for a stale set (`on_stale: observe`), so only a check's own override can make it refuse."""
        mode = Mode.OBSERVE if stale else self._modes.get(tool, self._default)
        return self._checks.get(tool, {}).get(check, mode) is Mode.REJECT

    def fails_closed(self, tool: ToolPolicy, check: str) -> bool:
        """Whether `check` reports a problem (rather than being skipped) while its source cannot be read."""
        if check.startswith(ARG):
            binding = _binding(tool, check)
            config = self._policy.value_sets.get(binding.value_set) if binding is not None else None
            return config is not None and set_failure(config, self._failures) is Failure.CLOSED
        if check.startswith(RECORD):
            record = _record(tool, check)
            return record is not None and record_failure(record, self._failures) is Failure.CLOSED
        return False  # a rule's on_error is the policy's alone

    def refusing_causes(self, name: str, tool: ToolPolicy | None, signature: Signature) -> list[str]:
        """The causes of the problems that refuse a call of `name` with `signature` ([]: it is let through);
        `tool` None: a tool the policy lacks."""
        causes = []
        stale = JUDGED_STALE in signature
        for element in signature:
            if element == JUDGED_STALE:
                continue
            check, cause, skipped = element
            if (skipped or cause == "unverifiable") and (tool is None or not self.fails_closed(tool, check)):
                continue  # it fails open here: listed as skipped, never a problem
            if self.enforced(name, check, stale):
                causes.append(cause)
        return causes


def touched_tools(policy: Policy, target: Target) -> tuple[str, ...]:
    """The tools a change of `target` can change a decision of, in policy order."""
    if target.tool != GLOBAL:
        return (target.tool,) if target.tool in policy.tools else ()
    if not target.check:
        return (*policy.tools, UNKNOWN_TOOLS) if UNKNOWN_TOOLS not in policy.tools else tuple(policy.tools)
    return tuple(name for name, tool in policy.tools.items() if _reads(policy, tool, target.check))


def preview(
    policy: Policy,
    tools: PolicyModes,
    document: ModeDocument,
    request: OverrideRequest,
    now: float,
    windows: Sequence[Window],
) -> Preview:
    """What `request` would have done over each of `windows`; raises ModeRefused as SetMode would."""
    changed, entry = doc.apply(document, request, tools, now)
    if entry.refused:
        raise doc.ModeRefused(entry.outcome.removeprefix("refused: "))
    before, after = ResolvedModes(policy, document, tools), ResolvedModes(policy, changed, tools)
    touched = touched_tools(policy, request.target)
    unknown_counted = any(key[0] == UNKNOWN_TOOLS for _, _, counts in windows for key in counts)
    if UNKNOWN_TOOLS not in policy.tools and not unknown_counted:
        # Listed only where such calls were counted (the protection is named whatever the counts).
        touched = tuple(name for name in touched if name != UNKNOWN_TOOLS)
    wanted = set(touched)
    by_tool: dict[str, list[WindowPreview]] = {name: [] for name in touched}
    totals = []
    for seconds, covered, counts in windows:
        rows = {name: WindowPreview(seconds, covered) for name in touched}
        for (tool_name, signature), calls in counts.items():
            if tool_name not in wanted or not calls:
                continue
            row = rows[tool_name]
            row.calls += calls
            if signature == NOT_KEPT:
                row.not_previewed += calls
                continue
            _decide(row, tool_name, policy.tools.get(tool_name), signature, calls, before, after)
        total = WindowPreview(seconds, covered)
        for name in touched:
            by_tool[name].append(rows[name])
            total.absorb(rows[name])
        totals.append(total)
    protections = switched_off(policy, touched, before, after)
    target = request.target
    unknown = target.tool == GLOBAL and not target.check and UNKNOWN_TOOLS not in policy.tools
    if unknown and before.enforced(UNKNOWN_TOOLS, "") and not after.enforced(UNKNOWN_TOOLS, ""):
        protections.append(
            Protection(
                "check",
                False,
                UNKNOWN_TOOLS,
                "",
                "calls naming a tool the policy does not know would no longer be refused (unknown_tool)",
            )
        )
    old, new = entry.old, entry.new
    if target.tool != GLOBAL and target.check:  # a check's mode in force, whether an override or the tool's
        old = "reject" if before.enforced(target.tool, target.check) else "observe"
        new = "reject" if after.enforced(target.tool, target.check) else "observe"
    return Preview(
        request.target,
        old,
        new,
        request.expires_in,
        touched,
        totals,
        by_tool,
        protections[:MAX_PROTECTIONS],
        max(0, len(protections) - MAX_PROTECTIONS),
        clearing=request.mode is None,
        repeats_unchecked=any(
            name in policy.tools and policy.tools[name].side_effect is not None and after.enforced(name, REPEAT_CHECK)
            for name in touched
        ),
    )


def _decide(
    row: WindowPreview,
    name: str,
    tool: ToolPolicy | None,
    signature: Signature,
    calls: int,
    before: ResolvedModes,
    after: ResolvedModes,
) -> None:
    now = before.refusing_causes(name, tool, signature)
    then = after.refusing_causes(name, tool, signature)
    if now:
        row.refused_now += calls
    if now and not then:
        row.newly_allowed += calls
        for cause in set(now):
            row.newly_allowed_by_cause[cause] = row.newly_allowed_by_cause.get(cause, 0) + calls
    elif then and not now:
        row.newly_refused += calls
        for cause in set(then):
            row.newly_refused_by_cause[cause] = row.newly_refused_by_cause.get(cause, 0) + calls


def switched_off(
    policy: Policy, touched: Sequence[str], before: ResolvedModes, after: ResolvedModes
) -> list[Protection]:
    """Every check of the touched tools that refuses now and would not (or would fail open), security first."""
    found = []
    for name in touched:
        tool = policy.tools.get(name)
        if tool is None:
            continue  # the calls naming a tool the policy lacks: preview() names that protection
        for check in sorted(tool_checks(tool)):
            if not before.enforced(name, check):
                continue
            closed = before.fails_closed(tool, check)
            if not after.enforced(name, check):
                found.append(_off(policy, tool, check, closed))
            elif closed and not after.fails_closed(tool, check):
                found.append(_opened(policy, tool, check))
    # Policy order within a kind: a position looked up, not searched (a global change touches every tool).
    position = {name: index for index, name in enumerate(touched)}
    found.sort(key=lambda p: (not p.security, KIND_ORDER.index(p.kind), position[p.tool], p.check))
    return found


def _off(policy: Policy, tool: ToolPolicy, check: str, closed: bool) -> Protection:
    """A check that would stop refusing altogether."""
    parts: list[str] = []
    kind = "check"
    record = _record(tool, check) if check.startswith(RECORD) else None
    if record is not None:
        if record.owner_attribute:
            kind = "ownership"
            parts.append(f"another customer's {record.kind} (ownership)")
        parts.append(f"{record.kind} ids that do not exist")
    elif check.startswith(ARG):
        binding = _binding(tool, check)
        parts.append(f"values outside {binding.value_set}" if binding is not None else "values outside its set")
    elif check == REPEAT_CHECK:
        kind = "repeat"
        parts.append("repeats of an operation that already ran")
    elif check.startswith("rule:"):
        parts.append(f"calls breaking the rule {check.removeprefix('rule:')}")
    else:
        parts.append("arguments the schema does not allow")
    if closed:
        kind = "fail_closed" if kind == "check" else kind
        parts.append(f"calls it cannot check while {_source_of(policy, tool, check)} is down (fails closed)")
    return Protection(
        kind,
        kind in SECURITY_KINDS,
        tool.name,
        check,
        f"{tool.name} {check} would no longer refuse " + "; ".join(parts),
    )


def _opened(policy: Policy, tool: ToolPolicy, check: str) -> Protection:
    """A fail-closed check that would fail open: enforced whenever its source answers, skipped while not."""
    source = _source_of(policy, tool, check)
    record = _record(tool, check) if check.startswith(RECORD) else None
    unchecked = "values"
    kind = "fail_closed"
    if record is not None:
        unchecked = f"{record.kind} ids exist" + (" and are the customer's own" if record.owner_attribute else "")
        kind = "ownership" if record.owner_attribute else kind
        unchecked = "whether " + unchecked
    text = (
        f"{tool.name} {check} would let calls through while {source} is down (fails open): {unchecked} "
        "would go unchecked then, counted as skipped; enforced again the moment it answers"
    )
    return Protection(kind, True, tool.name, check, text)


def _binding(tool: ToolPolicy, check: str) -> ArgumentBinding | None:
    pattern = check.removeprefix(ARG)
    return next((binding for binding in tool.arguments if binding.name == pattern), None)


def _record(tool: ToolPolicy, check: str) -> RecordBinding | None:
    name = check.removeprefix(RECORD)
    return next((record for record in tool.records if record.name == name), None)


def _source_of(policy: Policy, tool: ToolPolicy, check: str) -> str:
    if check.startswith(RECORD):
        record = _record(tool, check)
        return record.source if record is not None else "its source"
    binding = _binding(tool, check)
    config = policy.value_sets.get(binding.value_set) if binding is not None else None
    return config.source if config is not None else "its source"


def _reads(policy: Policy, tool: ToolPolicy, target: str) -> bool:
    """Whether a check of `tool` reads the failure override's target (a source, a set or a record kind)."""
    for binding in tool.arguments:
        config = policy.value_sets.get(binding.value_set)
        if target == VALUE_SET + binding.value_set or (config is not None and target == SOURCE + config.source):
            return True
    return any(target in (RECORD_KIND + record.kind, SOURCE + record.source) for record in tool.records)
