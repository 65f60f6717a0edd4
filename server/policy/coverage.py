"""The argument surface's coverage: what the policy checks of each tool argument, what it does not, and what to bind.

Membership checks cover the enumerable part of the surface, not the surface:
a free-text argument, an id nothing looks up and a code bound to no set pass
every check. This lists every argument of every tool (the schema's properties,
imported definitions' included, and every argument a binding, record or rule
names), each with what constrains it and one of four verdicts (Coverage, in
schema_surface.py). The covered share counts the enumerated and checked
arguments over all of them: a bare `type: string` checks the type, not the
value. Unbound arguments that look enumerable (by name, or by the few distinct
values sampled) are suggested for a binding, each with why. Pure: no I/O, no
gRPC.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from argwatch.server.policy.arg_paths import format_path, top_of
from argwatch.server.policy.model import Policy, ToolPolicy
from argwatch.server.policy.schema_surface import (
    TOO_COMPLEX,
    Coverage,
    schema_surface,
    stronger,
    undeclared_arguments,
)

MAX_LISTED_PER_TOOL = 200  # argument rows listed per tool (all are counted)
MAX_LISTED = 5000  # argument rows listed in all: bounds the Admin API's answer (~100 bytes a row)
MAX_SUGGESTIONS = 100
# "Few distinct values": at least MIN_SAMPLED values seen, at most FEW_DISTINCT of them distinct.
MIN_SAMPLED = 10
FEW_DISTINCT = 5
SHOWN_EXAMPLES = 3
EXAMPLE_CHARS = 40
# Name endings of arguments that name a record (an id) or a member of a set (a code, a type, ...).
RECORD_ENDINGS = ("id",)
SET_ENDINGS = ("code", "type", "status", "kind")
# args.<field>(.<field>)*: the argument paths a rule's expression reads (args['x'] is left uncounted).
_ARGUMENT_CHAIN = re.compile(r"\bargs((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


@dataclass(frozen=True, slots=True)
class ArgumentCoverage:
    """One argument of one tool: what constrains it, and how far."""

    argument: str  # a top-level name, or a path as a binding names it: filters.since, lines[*].sku, tags[*]
    coverage: Coverage
    # value_set:<set>, enum, const, type:<type>, format:<format> (with " (no checker: not checked)" where the
    # gateway has none), pattern, range, length, record:<binding>, owner, rule:<name>, false, cycle:<ref>;
    # items:<...> for what an array's items must be; TOO_COMPLEX for one past its tool's node budget.
    constraints: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Counts:
    """How many arguments got each verdict."""

    enumerated: int = 0
    checked: int = 0
    typed: int = 0
    unconstrained: int = 0

    @property
    def total(self) -> int:
        return self.enumerated + self.checked + self.typed + self.unconstrained

    @property
    def covered(self) -> int:
        return self.enumerated + self.checked

    @property
    def share(self) -> float:
        """covered / total, 0 when there is no argument."""
        return self.covered / self.total if self.total else 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.enumerated + other.enumerated,
            self.checked + other.checked,
            self.typed + other.typed,
            self.unconstrained + other.unconstrained,
        )


@dataclass(frozen=True, slots=True)
class ToolCoverage:
    tool: str
    counts: Counts
    arguments: tuple[ArgumentCoverage, ...]  # in the schema's order, then as the policy names them; bounded
    left_off: int  # arguments counted but not listed (MAX_LISTED_PER_TOOL, MAX_LISTED)
    # Why arguments the tool does not list pass unchecked ("no schema", ...); "" when its schema refuses them.
    undeclared: str


@dataclass(frozen=True, slots=True)
class SampledValues:
    """The values seen of one argument (the gateway's offending values, or a sampled log's)."""

    total: int
    distinct: int
    examples: tuple[str, ...]  # the most frequent first, as JSON text
    complete: bool = True  # False when more distinct values were seen than were kept: `distinct` is a floor


@dataclass(frozen=True, slots=True)
class Suggestion:
    """An argument that looks enumerable but is not bound, and why."""

    tool: str
    argument: str
    # "value_set" (a code, a type, few distinct values) or "record" (an id: look it up); `argument` is the
    # path the binding names, nested or in an array's elements (lines[*].sku) as well as at the top.
    binding: str
    reason: str


@dataclass(frozen=True, slots=True)
class PolicyCoverage:
    policy_version: str
    counts: Counts
    tools: tuple[ToolCoverage, ...]
    suggestions: tuple[Suggestion, ...]  # at most MAX_SUGGESTIONS, in tool and argument order
    suggestions_left_off: int


SampleKey = tuple[str, str]  # (tool, argument path)


@dataclass(frozen=True, slots=True)
class _Candidate:
    """An argument a binding could be suggested for: no set or enum enumerates it, no record looks it up."""

    order: int  # its place in the policy: suggestions come in tool and argument order
    binding: str
    named: str  # why its name suggests a binding; "" when it does not
    redacted: bool  # its sampled values read REDACTED: they say nothing


@dataclass(frozen=True, slots=True)
class PolicySurface:
    """What the policy alone decides (computed once per policy); samples add the rest (coverage_with)."""

    policy_version: str
    counts: Counts
    tools: tuple[ToolCoverage, ...]
    candidates: Mapping[SampleKey, _Candidate]


def policy_coverage(policy: Policy, samples: Mapping[SampleKey, SampledValues] | None = None) -> PolicyCoverage:
    """Every tool's arguments with what constrains them, the covered share, and the bindings worth adding."""
    return coverage_with(policy_surface(policy), samples or {})


def policy_surface(policy: Policy) -> PolicySurface:
    """Each tool's arguments and counts, and each argument a binding could be suggested for. It walks every
    schema, each tool's walk bounded (schema_surface.MAX_NODES): a gateway keeps it for the
    policy it serves."""
    tools: list[ToolCoverage] = []
    candidates: dict[SampleKey, _Candidate] = {}
    budget = MAX_LISTED
    for tool in policy.tools.values():
        rows = tool_arguments(tool)
        listed = _listed(rows, min(MAX_LISTED_PER_TOOL, budget))
        budget -= len(listed)
        tools.append(
            ToolCoverage(
                tool=tool.name,
                counts=_counts(rows),
                arguments=tuple(listed),
                left_off=len(rows) - len(listed),
                undeclared=undeclared_arguments(tool.schema),
            )
        )
        for row in rows:
            if row.coverage is Coverage.ENUMERATED or any(c.startswith("record:") for c in row.constraints):
                continue
            binding, named = _by_name(_last_name(row.argument))
            redacted = bool({row.argument, top_of(row.argument)} & policy.sampling.redact)
            candidates[tool.name, row.argument] = _Candidate(len(candidates), binding, named, redacted)
    return PolicySurface(
        policy_version=policy.version,
        counts=sum((tool.counts for tool in tools), Counts()),
        tools=tuple(tools),
        candidates=candidates,
    )


def coverage_with(surface: PolicySurface, samples: Mapping[SampleKey, SampledValues]) -> PolicyCoverage:
    """The policy's coverage with the bindings its names and these samples suggest: costs the suggestions only."""
    keys = [key for key, candidate in surface.candidates.items() if candidate.named]
    keys += [key for key in samples if key in surface.candidates and not surface.candidates[key].named]
    suggestions = []
    for key in sorted(keys, key=lambda key: surface.candidates[key].order):
        candidate = surface.candidates[key]
        reasons = [candidate.named] if candidate.named else []
        sampled = samples.get(key)
        if sampled is not None and not candidate.redacted and _few(sampled):
            reasons.append(
                f"{sampled.total} values sampled, {sampled.distinct} distinct ({_examples(sampled)}): "
                "the model writes it from a small vocabulary"
            )
        if reasons:
            suggestions.append(Suggestion(key[0], key[1], candidate.binding, "; ".join(reasons)))
    return PolicyCoverage(
        policy_version=surface.policy_version,
        counts=surface.counts,
        tools=surface.tools,
        suggestions=tuple(suggestions[:MAX_SUGGESTIONS]),
        suggestions_left_off=max(len(suggestions) - MAX_SUGGESTIONS, 0),
    )


def tool_arguments(tool: ToolPolicy) -> list[ArgumentCoverage]:
    """Each argument of one tool: the schema's leaves in its order, then those only the policy names."""
    surface = schema_surface(tool.schema, tool.assert_formats)
    found: dict[str, tuple[list[str], Coverage]] = {
        path: (list(leaf.constraints), leaf.coverage) for path, leaf in surface.leaves.items()
    }

    def add(argument: str, constraint: str, coverage: Coverage) -> None:
        constraints, before = found.setdefault(argument, ([], Coverage.UNCONSTRAINED))
        if constraint and constraint not in constraints:
            constraints.append(constraint)
        found[argument] = (constraints, stronger(before, coverage))

    for binding in tool.arguments:
        add(binding.name, f"value_set:{binding.value_set}", Coverage.ENUMERATED)
    for record in tool.records:
        add(record.id_argument, f"record:{record.name}", Coverage.CHECKED)
        if record.owner_attribute:
            add(record.id_argument, "owner", Coverage.CHECKED)
    for rule in tool.rules:
        for argument in _read_by(rule.expression, set(surface.leaves), surface.containers):
            add(argument, f"rule:{rule.name}", Coverage.CHECKED)
        if rule.argument and rule.argument not in surface.containers:
            add(rule.argument, "", Coverage.UNCONSTRAINED)  # named by the policy: on the surface, checked or not
    return [ArgumentCoverage(path, coverage, tuple(constraints)) for path, (constraints, coverage) in found.items()]


def _listed(rows: list[ArgumentCoverage], limit: int) -> list[ArgumentCoverage]:
    """At most `limit` of a tool's rows, shown in its order: those its walk did not assess (past the node
    budget) are kept before any other, since the counts alone would not say why they are unconstrained."""
    if len(rows) <= limit:
        return rows
    unassessed_first = sorted(range(len(rows)), key=lambda index: TOO_COMPLEX not in rows[index].constraints)
    return [rows[index] for index in sorted(unassessed_first[:limit])]


def _read_by(expression: str, leaves: set[str], containers: set[str]) -> list[str]:
    """The arguments a rule's expression reads: the longest listed path of each `args.a.b` chain
    (`args.filters.since` reads filters.since; `args.note.size()` reads note). A chain that stops at an
    object argument reads the whole object: it is not counted for any of its properties."""
    read: list[str] = []
    for chain in _ARGUMENT_CHAIN.findall(expression):
        parts = chain[1:].split(".")
        paths = [format_path(parts[: end + 1]) for end in range(len(parts))]
        listed = [path for path in paths if path in leaves]
        if listed:
            read.append(listed[-1])
        elif parts[0] not in containers:
            read.append(parts[0])
    return list(dict.fromkeys(read))


def _counts(rows: list[ArgumentCoverage]) -> Counts:
    kinds = [row.coverage for row in rows]
    return Counts(
        enumerated=kinds.count(Coverage.ENUMERATED),
        checked=kinds.count(Coverage.CHECKED),
        typed=kinds.count(Coverage.TYPED),
        unconstrained=kinds.count(Coverage.UNCONSTRAINED),
    )


def _last_name(path: str) -> str:
    """The name a path's leaf goes by: `sku` of lines[*].sku; of `item_ids[*]`, its array's in the singular
    (`item_id`), since each element is one."""
    steps = [plain or quoted for plain, quoted in _NAME_STEPS.findall(path)]
    name = steps[-1] if steps else path
    if path.endswith("[*]") and len(name) > 1 and name.endswith("s"):
        return name[:-1]
    return name


_NAME_STEPS = re.compile(r'(?:^|\.)([^.\["]+)|\["((?:[^"\\]|\\.)*)"\]')


def _by_name(name: str) -> tuple[str, str]:
    """The binding an argument's name suggests, and why ("" when none): an id is looked up, a code is a set's."""
    if ending := _ending(name, RECORD_ENDINGS):
        return "record", f"its name ends in {ending}: an id names a record, and no record binding looks it up"
    if ending := _ending(name, SET_ENDINGS):
        return "value_set", f"its name ends in {ending}: such values come from a set, and none is bound"
    return "value_set", ""


def _ending(name: str, endings: tuple[str, ...]) -> str:
    """The ending `name` has among `endings` (order_id, orderId, id), as written ("_id", "Id"); "" if none."""
    for ending in endings:
        if name.lower() == ending:
            return name
        if name.endswith(f"_{ending}"):
            return f"_{ending}"
        camel = ending.capitalize()
        if name.endswith(camel) and len(name) > len(camel) and not name[-len(camel) - 1].isupper():
            return camel
    return ""


def _few(sampled: SampledValues) -> bool:
    return sampled.complete and sampled.total >= MIN_SAMPLED and 0 < sampled.distinct <= FEW_DISTINCT


def _examples(sampled: SampledValues) -> str:
    shown = [_clipped(value) for value in sampled.examples[:SHOWN_EXAMPLES]]
    more = sampled.distinct - len(shown)
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")


def _clipped(value: str) -> str:
    return value if len(value) <= EXAMPLE_CHARS else value[: EXAMPLE_CHARS - 1] + "…"
