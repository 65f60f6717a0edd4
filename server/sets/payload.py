"""What a source hands the provider: one set's content, before indexing, and the errors sources raise."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, Protocol, runtime_checkable


class Retirement(NamedTuple):
    """What is known of a retired value: when (epoch seconds, None if unknown) and what replaced it."""

    retired_at: float | None
    replaced_by: str = ""


@dataclass(frozen=True, slots=True)
class SetPayload:
    """One value set as a source answered it."""

    name: str
    version: int
    # Any sequence, converted a chunk at a time while indexing: a protobuf repeated field
    # stays one, so a million members are never turned into str objects in one C call. Or a
    # large set's layers (overlay.OverlaySet, updates.apply_delta), read a chunk at a time.
    members: Sequence[str] | Set[str]
    retired: Sequence[str] = ()
    # Details for some of the retired values, by value.
    retirements: Mapping[str, Retirement] = field(default_factory=lambda: MappingProxyType({}))
    # Members of `members` to leave out (a delta's removals, applied while indexing rather
    # than in one O(n) pass on the event loop).
    excluded: Set[str] = frozenset()
    # The owner's run of versions this one belongs to (sources.proto ValueSet.incarnation).
    incarnation: str = ""
    # Published per scope: members and retired values are scope keys (scoped.py), and only a set the policy
    # scopes takes them.
    scoped: bool = False


class SnapshotUpdate(NamedTuple):
    """A whole set, from a watch stream."""

    payload: SetPayload


class DeltaUpdate(NamedTuple):
    """Members added and removed between two versions of a set."""

    name: str
    from_version: int
    to_version: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    replaced_by: Mapping[str, str]
    incarnation: str = ""
    # Added and removed are scope keys (scoped.py); replaced_by maps a removed key to a value of its scope.
    scoped: bool = False


class HeartbeatUpdate(NamedTuple):
    """The source is alive and holds these versions."""

    versions: Mapping[str, int]
    incarnation: str = ""


class OversizedSnapshot(NamedTuple):
    """A snapshot sent in parts whose members added up past the set's max_members: refused while it arrived."""

    name: str
    version: int
    incarnation: str
    members: int  # counted when it was refused


class OversizedDelta(NamedTuple):
    """A delta changing more values than one delta may (grpc_source.MAX_DELTA_VALUES): refused unread, and the
    set fetched whole instead."""

    name: str
    to_version: int
    incarnation: str
    values: int


Update = SnapshotUpdate | DeltaUpdate | HeartbeatUpdate | OversizedSnapshot | OversizedDelta


class WatchUnsupported(Exception):
    """The source does not implement WatchValueSets; pull it instead."""


class SourceUnavailable(Exception):
    """The source could not answer for a set now (down, slow, refused, or does not serve it)."""


class NotServed(SourceUnavailable):
    """The source answered, and does not serve this set (NOT_FOUND; a file without it): up, but no set."""


class SetFetcher(Protocol):
    """A source of value sets, seen from the provider."""

    async def fetch(self, name: str) -> SetPayload:
        """The set's current content; raises SourceUnavailable when it cannot be had."""
        ...

    async def close(self) -> None:
        """Releases connections."""
        ...


@runtime_checkable
class SetWatcher(SetFetcher, Protocol):
    """A source that can also stream changes (WatchValueSets): followed by its stream, not pulled."""

    def watch(self, names: list[str]) -> AsyncGenerator[Update]:
        """Snapshots first, then deltas and heartbeats; raises SourceUnavailable or WatchUnsupported."""
        ...
