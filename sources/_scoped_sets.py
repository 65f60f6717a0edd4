"""Sets published per scope (a customer's or tenant's own members): their versions, deltas and wire messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from argwatch.v1 import sources_pb2

MAX_SCOPE_CHARS = 256  # what a gateway takes (sources.proto ScopeMembers.scope)
MAX_VALUE_CHARS = 1024  # the longest member, retired value or replacement a gateway takes (server/sets/retired.py)


def _nothing() -> Mapping[str, frozenset[str]]:
    return MappingProxyType({})


def _no_replacements() -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ScopedMembers:
    """A scoped set's content: each scope's members, retired values and replacements.

    Attributes:
        members: Scope -> its legal values (a scope with none is left out).
        retired: Scope -> values it held once and no longer does.
        replaced_by: Scope -> (retired value -> the member of that scope that replaced it).
    """

    members: Mapping[str, frozenset[str]] = field(default_factory=_nothing)
    retired: Mapping[str, frozenset[str]] = field(default_factory=_nothing)
    replaced_by: Mapping[str, Mapping[str, str]] = field(default_factory=_no_replacements)

    @property
    def size(self) -> int:
        return sum(len(values) for values in self.members.values())


def check_scope(scope: object) -> str:
    if not isinstance(scope, str) or not 0 < len(scope) <= MAX_SCOPE_CHARS or "\x00" in scope:
        raise ValueError(f"{scope!r} is no scope: a scope is 1 to {MAX_SCOPE_CHARS} characters, with no NUL")
    return scope


def check_values(name: str, *groups: Iterable[str]) -> None:
    """Refuses a value no gateway would take: one over MAX_VALUE_CHARS would have every gateway refuse each
    update that carries it: this one and, once the owner holds it, every whole copy after."""
    for values in groups:
        if max(map(len, values), default=0) > MAX_VALUE_CHARS:
            raise ValueError(f"{name}: a value is longer than {MAX_VALUE_CHARS} characters, which no gateway takes")


def changed(
    previous: ScopedMembers,
    new_members: Mapping[str, Iterable[str]],
    replaced_by: Mapping[str, Mapping[str, str]],
    *,
    whole: bool,
) -> tuple[ScopedMembers, sources_pb2.ValueSetDelta]:
    """The content after replacing the scopes in `new_members` (every scope when `whole`: one left out is
    emptied), and the delta a watcher gets: per scope, the members added and removed (removed ones retire in
    their scope, with their replacements)."""
    members = dict(previous.members)
    retired = dict(previous.retired)
    replacements = {scope: dict(found) for scope, found in previous.replaced_by.items()}
    wanted = {check_scope(scope): frozenset(values) for scope, values in new_members.items()}
    check_values("a scoped set", *wanted.values())
    for scope, given in replaced_by.items():
        check_scope(scope)
        check_values("a scoped set", *given.items())
    if whole:
        wanted = {**dict.fromkeys(members, frozenset()), **wanted}
    delta = sources_pb2.ValueSetDelta()
    for scope in sorted(wanted.keys() | replaced_by.keys()):
        old = members.get(scope, frozenset())
        new = wanted.get(scope, old)
        replaced = {**replacements.get(scope, {}), **replaced_by.get(scope, {})}
        gone = old - new
        held = (retired.get(scope, frozenset()) | gone | replaced.keys()) - new
        for found, value in ((members, new), (retired, held)):
            if value:
                found[scope] = value
            else:
                found.pop(scope, None)
        replaced = {old_value: by for old_value, by in replaced.items() if old_value not in new}
        if replaced:
            replacements[scope] = replaced
        else:
            replacements.pop(scope, None)
        if new - old:
            delta.scoped_added.append(sources_pb2.ScopeMembers(scope=scope, members=sorted(new - old)))
        if gone:
            delta.scoped_removed.append(
                sources_pb2.ScopeMembers(
                    scope=scope,
                    members=sorted(gone),
                    replaced_by={value: by for value, by in replaced.items() if value in gone},
                )
            )
    content = ScopedMembers(
        MappingProxyType(members),
        MappingProxyType(retired),
        MappingProxyType({scope: MappingProxyType(found) for scope, found in replacements.items()}),
    )
    return content, delta


def retired_values(content: ScopedMembers) -> list[sources_pb2.RetiredValue]:
    """Every retired value with its scope and, where known, what replaced it."""
    return [
        sources_pb2.RetiredValue(
            value=value, scope=scope, replaced_by=content.replaced_by.get(scope, {}).get(value, "")
        )
        for scope in sorted(content.retired)
        for value in sorted(content.retired[scope])
    ]


def scope_parts(content: ScopedMembers, part_members: int) -> list[list[sources_pb2.ScopeMembers]]:
    """The scopes, sorted, in parts of about `part_members` members (a large scope split across parts)."""
    parts: list[list[sources_pb2.ScopeMembers]] = [[]]
    room = part_members
    for scope in sorted(content.members):
        values = sorted(content.members[scope])
        while values:
            if room == 0:
                parts.append([])
                room = part_members
            taken, values = values[:room], values[room:]
            parts[-1].append(sources_pb2.ScopeMembers(scope=scope, members=taken))
            room -= len(taken)
    return parts
