"""The legal values Repair offers for one argument: a value set's members or a schema enum's, all or the nearest few.

Both are listed up to `repair.list_limit`; past it, the nearest few to the value
given (Levenshtein on loose forms), and the total, so the model is never told
that what it was shown is everything when it is not.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from argwatch.server.policy.model import Disclosure, RepairConfig
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.verdict.findings import Problem

_loose = normaliser(LOOSE)


@dataclass(frozen=True, slots=True)
class LegalValues:
    """The values offered for one argument."""

    argument: str
    value_set: str  # "" for a schema enum
    values: tuple[str, ...]
    total: int
    complete: bool


def legal_values_for(
    problem: Problem, snapshot: ValueSetSnapshot, config: RepairConfig, disclose: Disclosure = Disclosure.LIST
) -> LegalValues:
    """All members sorted for a small set that may be listed; otherwise the nearest few to the value given."""
    total = snapshot.size
    if disclose is Disclosure.LIST and total <= config.list_limit:
        everything = snapshot.sorted_members or tuple(sorted(snapshot.members))
        return LegalValues(problem.argument, problem.value_set, everything, total, True)
    first = [problem.suggestion] if problem.suggestion else []
    nearest = _nearest(unquote(problem.value), snapshot.members, first, config.nearest)
    # "Never the whole set": a set no larger than `nearest` would otherwise be listed whole after all.
    offered = config.nearest if disclose is Disclosure.LIST else min(config.nearest, total - 1)
    return LegalValues(problem.argument, problem.value_set, nearest[:offered], total, False)


def enum_values_for(problem: Problem, members: Sequence[object], config: RepairConfig) -> LegalValues:
    """A schema enum's members as JSON text, in the schema's order: all of them up to `list_limit`, else the
    nearest few to the value given. The enum is in the tool's definition already: nothing is withheld."""
    texts = tuple(dict.fromkeys(_json_text(member) for member in members))
    if len(texts) <= config.list_limit:
        return LegalValues(problem.argument, "", texts, len(texts), True)
    # Compared as JSON text on both sides, so a number sent for a string (or the reverse) still finds it.
    nearest = _nearest(problem.value, texts, [], config.nearest)
    return LegalValues(problem.argument, "", nearest[: config.nearest], len(texts), False)


def as_strings(legal: LegalValues) -> LegalValues | None:
    """An enum's listing with each JSON string decoded, as a value set's members are offered; None when a
    member is not a string (a client copying "1" would send a string where the number 1 is meant)."""
    decoded = []
    for text in legal.values:
        value = json.loads(text)
        if not isinstance(value, str):
            return None
        decoded.append(value)
    return LegalValues(legal.argument, legal.value_set, tuple(decoded), legal.total, legal.complete)


def enum_at(schema: object, pointer: str) -> Sequence[object] | None:
    """The enum at `pointer` (RFC 6901) in a tool's schema; None when nothing, or no list, is there (the
    policy was reloaded since the call was judged)."""
    node = schema
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node if isinstance(node, list) else None


def _nearest(wanted: str, candidates: Iterable[str], first: list[str], count: int) -> tuple[str, ...]:
    nearest = list(first)
    if wanted:
        # Levenshtein, because a model's typo is mostly a substitution; compared on loose forms so case
        # and separators do not dominate. A few extra candidates, ordered by (score, value), make ties
        # come out the same in every process.
        found = process.extract(
            wanted, candidates, scorer=Levenshtein.normalized_similarity, processor=_loose, limit=count * 4
        )
        for member, _, _ in sorted(found, key=lambda hit: (-hit[1], hit[0])):
            if member not in nearest:
                nearest.append(member)
    else:
        nearest.extend(m for m in heapq.nsmallest(count, candidates) if m not in nearest)
    return tuple(nearest)


def _json_text(value: object) -> str:
    # The json module, not orjson: a YAML integer past 64 bits is a valid enum member that orjson refuses.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def unquote(json_text: str) -> str:
    """A JSON string's text without its quotes (escapes left as they are); "" for any other JSON."""
    if len(json_text) >= 2 and json_text.startswith('"') and json_text.endswith('"'):
        return json_text[1:-1]
    return ""
