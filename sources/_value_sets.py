"""ValueSetCatalog and its servicer: the sets an owning service publishes, streamed to every gateway that watches.

The bundled demo owning service and the tests run it. `publish` replaces a set,
bumps its version and pushes a delta (added, removed, what replaced the removed) to every watcher;
watchers get a snapshot of each set first and a heartbeat when nothing changes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from argwatch.sources._scoped_sets import ScopedMembers, changed, retired_values, scope_parts
from argwatch.v1 import sources_pb2, sources_pb2_grpc


@dataclass(frozen=True, slots=True)
class PublishedSet:
    """One version of a set as its owner publishes it.

    Attributes:
        name: The set's name, "<owner>.<set>" by convention.
        version: Counts from 1 in each catalog, one more with every publish.
        members: The legal values.
        retired: Values the set held once and no longer does.
        updated_at: When it was published, in seconds since the epoch.
        incarnation: The catalog's incarnation (see ValueSetCatalog).
        replaced_by: For retired values that were replaced: the retired value -> the legal value that replaced it.
        scoped: For a set published per scope (`members_by_scope`, `publish_scope`): each scope's members,
            retired values and replacements; `members`, `retired` and `replaced_by` are then empty. None for a
            global set.
    """

    name: str
    version: int
    members: frozenset[str]
    retired: frozenset[str]
    updated_at: float
    incarnation: str = ""
    # A read-only view: the dataclass is frozen, and the mapping must not change under it.
    replaced_by: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    scoped: ScopedMembers | None = field(default=None, hash=False)


class ValueSetCatalog:
    """The owner's sets, with their versions; notifies watchers of every change.

    Versions count from 1 in each catalog, so each catalog is a new incarnation
    (sources.proto ValueSet.incarnation): a gateway that sees an owner restart
    takes its sets afresh instead of refusing version 1 as older than what it
    held. Pass `incarnation` only when versions carry on across restarts (they
    come from a database, say), to keep the same one.
    """

    def __init__(self, incarnation: str | None = None) -> None:
        """An empty catalog.

        Args:
            incarnation: Keep versions counting across restarts under this id; a new one each catalog without it.
        """
        self.incarnation = uuid.uuid4().hex[:16] if incarnation is None else incarnation
        self._sets: dict[str, PublishedSet] = {}
        self._watchers: set[asyncio.Queue[sources_pb2.WatchValueSetsResponse]] = set()

    def publish(
        self,
        name: str,
        members: Iterable[str] = (),
        retired: Iterable[str] = (),
        *,
        replaced_by: Mapping[str, str] | None = None,
        members_by_scope: Mapping[str, Iterable[str]] | None = None,
    ) -> PublishedSet:
        """Replaces the set's members and pushes the change to every watching gateway.

        Args:
            name: The set's name, "<owner>.<set>" by convention ("refunds.reason_codes").
            members: The legal values, each exactly as the owning service compares it (leave it empty with
                `members_by_scope`).
            retired: Values the set held once, besides those this publish removes (which become retired too):
                a model that sends one is told it is retired, not that it was invented.
            replaced_by: Retired value -> the legal value that replaced it ({"CUSTOMER_UNHAPPY": "OTHER"});
                a value named here is retired. Repair messages name the replacement. Watching gateways
                get it with the value's removal (or with a snapshot); it is kept for later versions until the
                value becomes a member again.
            members_by_scope: For a set scoped per customer or tenant (the gateway's policy says `scope:` for
                it): every scope's members, by scope ({"cus_000": ["pm_visa_4242"]}); a scope left out has none
                any more, and members a scope loses retire in it. A gateway judges each call against its own
                scope's members only. To change one scope, `publish_scope` costs that scope alone.

        Returns:
            The new version of the set.

        Raises:
            ValueError: A scope is empty, longer than 256 characters or holds NUL; or the set is published
                scoped and global in turn; or `members_by_scope` is given with members, retired or replaced_by.
        """
        if members_by_scope is not None:
            if members or retired or replaced_by:
                raise ValueError("members_by_scope replaces the whole set: pass no members, retired or replaced_by")
            return self._publish_scoped(name, members_by_scope, {}, whole=True)
        previous = self._sets.get(name)
        if previous is not None and previous.scoped is not None:
            raise ValueError(f"{name} is published per scope: use members_by_scope or publish_scope")
        member_set = frozenset(members)
        replacements = {**(previous.replaced_by if previous else {}), **(replaced_by or {})}
        retired_set = frozenset(retired) | replacements.keys()
        if previous is not None:
            retired_set |= previous.retired | (previous.members - member_set)
        published = PublishedSet(
            name=name,
            version=(previous.version + 1) if previous else 1,
            members=member_set,
            retired=retired_set - member_set,
            updated_at=time.time(),
            incarnation=self.incarnation,
            replaced_by=MappingProxyType({old: new for old, new in replacements.items() if old not in member_set}),
        )
        self._sets[name] = published
        if previous is None:
            updates = snapshot_messages(published)
        else:
            removed = previous.members - member_set
            updates = [
                sources_pb2.WatchValueSetsResponse(
                    delta=sources_pb2.ValueSetDelta(
                        name=name,
                        from_version=previous.version,
                        to_version=published.version,
                        added=sorted(member_set - previous.members),
                        removed=sorted(removed),
                        replaced_by={old: new for old, new in published.replaced_by.items() if old in removed},
                        incarnation=self.incarnation,
                    )
                )
            ]
        for queue in self._watchers:
            for update in updates:  # a snapshot's parts go in a row: publish() does not yield
                queue.put_nowait(update)
        return published

    def publish_scope(
        self, name: str, scope: str, members: Iterable[str], *, replaced_by: Mapping[str, str] | None = None
    ) -> PublishedSet:
        """Replaces one scope's members of a scoped set (creating the set if it is new), and pushes the change
        to every watching gateway as a delta of that scope alone.

        Args:
            name: The set's name ("billing.payment_methods").
            scope: The scope, as calls' sessions carry it: a customer id or a tenant (1 to 256 characters, no
                NUL).
            members: The scope's legal values now; those it no longer holds retire in it.
            replaced_by: Retired value -> the member of this scope that replaced it; repair messages name it to
                this scope's callers only.

        Returns:
            The new version of the set.

        Raises:
            ValueError: The scope cannot be one, or the set is published as a global set.
        """
        return self._publish_scoped(name, {scope: members}, {scope: replaced_by or {}}, whole=False)

    def _publish_scoped(
        self,
        name: str,
        members: Mapping[str, Iterable[str]],
        replaced_by: Mapping[str, Mapping[str, str]],
        *,
        whole: bool,
    ) -> PublishedSet:
        previous = self._sets.get(name)
        if previous is not None and previous.scoped is None:
            raise ValueError(f"{name} is published as a global set: it cannot be published per scope too")
        held = previous.scoped if previous is not None and previous.scoped is not None else ScopedMembers()
        content, delta = changed(held, members, replaced_by, whole=whole)
        published = PublishedSet(
            name=name,
            version=(previous.version + 1) if previous else 1,
            members=frozenset(),
            retired=frozenset(),
            updated_at=time.time(),
            incarnation=self.incarnation,
            scoped=content,
        )
        self._sets[name] = published
        if previous is None:
            updates = snapshot_messages(published)
        else:
            delta.name, delta.from_version, delta.to_version = name, previous.version, published.version
            delta.incarnation = self.incarnation
            updates = [sources_pb2.WatchValueSetsResponse(delta=delta)]
        for queue in self._watchers:
            for update in updates:
                queue.put_nowait(update)
        return published

    def get(self, name: str) -> PublishedSet | None:
        """The set's current version, or None if it was never published.

        Args:
            name: The set's name.
        """
        return self._sets.get(name)

    def names(self) -> list[str]:
        """Every set published so far."""
        return list(self._sets)

    def subscribe(self) -> asyncio.Queue[sources_pb2.WatchValueSetsResponse]:
        """A queue that gets every change from now on, as watch messages (the servicer's side)."""
        queue: asyncio.Queue[sources_pb2.WatchValueSetsResponse] = asyncio.Queue()
        self._watchers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[sources_pb2.WatchValueSetsResponse]) -> None:
        """Stops `queue` getting changes.

        Args:
            queue: What subscribe() returned.
        """
        self._watchers.discard(queue)


# Members per snapshot message on a watch stream: ~1 MB, a few ms to decode.
PART_MEMBERS = 50_000


def to_wire(published: PublishedSet) -> sources_pb2.ValueSet:
    if published.scoped is not None:
        return sources_pb2.ValueSet(
            name=published.name,
            version=published.version,
            scopes=[entry for part in scope_parts(published.scoped, published.scoped.size or 1) for entry in part],
            retired_values=retired_values(published.scoped),
            updated_at=_timestamp(published.updated_at),
            incarnation=published.incarnation,
        )
    return sources_pb2.ValueSet(
        name=published.name,
        version=published.version,
        members=sorted(published.members),
        retired=sorted(published.retired),
        retired_values=_retired_values(published),
        updated_at=_timestamp(published.updated_at),
        incarnation=published.incarnation,
    )


def _retired_values(published: PublishedSet) -> list[sources_pb2.RetiredValue]:
    return [sources_pb2.RetiredValue(value=old, replaced_by=new) for old, new in sorted(published.replaced_by.items())]


def snapshot_messages(published: PublishedSet) -> list[sources_pb2.WatchValueSetsResponse]:
    """A snapshot as watch messages: one for a small set, parts of PART_MEMBERS for a large one."""
    if published.scoped is not None:
        return _scoped_messages(published, published.scoped)
    members = sorted(published.members)
    if len(members) <= PART_MEMBERS:
        return [sources_pb2.WatchValueSetsResponse(snapshot=to_wire(published))]
    slices = [members[start : start + PART_MEMBERS] for start in range(0, len(members), PART_MEMBERS)]

    def first(value_set: sources_pb2.ValueSet) -> None:
        value_set.retired.extend(sorted(published.retired))
        value_set.retired_values.extend(_retired_values(published))

    return _in_parts(published, [{"members": part} for part in slices], first)


def _scoped_messages(published: PublishedSet, content: ScopedMembers) -> list[sources_pb2.WatchValueSetsResponse]:
    parts = scope_parts(content, PART_MEMBERS)
    if len(parts) == 1:
        return [sources_pb2.WatchValueSetsResponse(snapshot=to_wire(published))]

    def first(value_set: sources_pb2.ValueSet) -> None:
        value_set.retired_values.extend(retired_values(content))

    return _in_parts(published, [{"scopes": part} for part in parts], first)


def _in_parts(
    published: PublishedSet,
    parts: list[dict[str, Any]],
    first: Callable[[sources_pb2.ValueSet], None],
) -> list[sources_pb2.WatchValueSetsResponse]:
    """A snapshot in these parts (each its slice of the members, or of the scopes): every part carries the
    name, version and incarnation; part 0 also what `first` adds (the retired values) and the update time."""
    messages = []
    for index, part in enumerate(parts):
        value_set = sources_pb2.ValueSet(
            name=published.name,
            version=published.version,
            part=index,
            parts=len(parts),
            incarnation=published.incarnation,
            **part,
        )
        if index == 0:
            first(value_set)
            value_set.updated_at.CopyFrom(_timestamp(published.updated_at))
        messages.append(sources_pb2.WatchValueSetsResponse(snapshot=value_set))
    return messages


class ValueSetSourceServicer(sources_pb2_grpc.ValueSetSourceServicer):
    """Serves a ValueSetCatalog over gRPC (ValueSetSource: GetValueSet and WatchValueSets)."""

    def __init__(self, catalog: ValueSetCatalog, heartbeat_seconds: float = 5.0) -> None:
        """Serves `catalog`.

        Args:
            catalog: The sets to serve.
            heartbeat_seconds: How long a watch stream may stay quiet before a heartbeat names the versions held.
        """
        self._catalog = catalog
        self._heartbeat = heartbeat_seconds

    async def GetValueSet(
        self,
        request: sources_pb2.GetValueSetRequest,
        context: grpc.aio.ServicerContext[sources_pb2.GetValueSetRequest, sources_pb2.GetValueSetResponse],
    ) -> sources_pb2.GetValueSetResponse:
        """ValueSetSource.GetValueSet: the whole set as it is now; NOT_FOUND for one never published.

        Args:
            request: The set's name.
            context: gRPC's context of the call.
        """
        published = self._catalog.get(request.name)
        if published is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no value set {request.name!r}")
        assert published is not None  # abort raises
        return sources_pb2.GetValueSetResponse(value_set=to_wire(published))

    async def WatchValueSets(
        self,
        request: sources_pb2.WatchValueSetsRequest,
        context: grpc.aio.ServicerContext[sources_pb2.WatchValueSetsRequest, sources_pb2.WatchValueSetsResponse],
    ) -> AsyncIterator[sources_pb2.WatchValueSetsResponse]:
        """ValueSetSource.WatchValueSets: a snapshot of each set, then every change, with heartbeats between.

        Args:
            request: The sets to watch; every set the catalog serves when it names none.
            context: gRPC's context of the call.
        """
        wanted = set(request.names) or set(self._catalog.names())
        queue = self._catalog.subscribe()
        try:
            for name in sorted(wanted):
                published = self._catalog.get(name)
                if published is not None:
                    for message in snapshot_messages(published):
                        yield message
            while True:
                try:
                    update = await asyncio.wait_for(queue.get(), timeout=self._heartbeat)
                except TimeoutError:
                    yield self._heartbeat_message(wanted)
                    continue
                name = update.snapshot.name if update.HasField("snapshot") else update.delta.name
                if name in wanted or not request.names:
                    yield update
        finally:
            self._catalog.unsubscribe(queue)

    def _heartbeat_message(self, wanted: set[str]) -> sources_pb2.WatchValueSetsResponse:
        heartbeat = sources_pb2.Heartbeat(sent_at=_timestamp(time.time()), incarnation=self._catalog.incarnation)
        for name in sorted(wanted):
            published = self._catalog.get(name)
            if published is not None:
                heartbeat.versions[name] = published.version
        return sources_pb2.WatchValueSetsResponse(heartbeat=heartbeat)


def _timestamp(epoch_seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(epoch_seconds * 1e9))
    return stamp
