"""ValueSetCatalog and its servicer: the sets an owning service publishes, streamed to every gateway that watches.

The bundled demo owning service and the tests run it. `publish` replaces a set,
bumps its version and pushes a delta (added, removed, what replaced the removed) to every watcher;
`add`, `remove` and `retire` change a few values of a set of any size in proportion to the change
(the members are sharded and copied on write: _sharded_members.py). Watchers get a snapshot of each
set first, its parts made as the stream sends them, and a heartbeat when nothing changes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from itertools import islice
from types import MappingProxyType

import grpc
from google.protobuf import timestamp_pb2

from argwatch.sources._scoped_sets import ScopedMembers, changed, check_values, retired_values, scope_parts
from argwatch.sources._sharded_members import ShardedMembers
from argwatch.v1 import sources_pb2, sources_pb2_grpc


@dataclass(frozen=True, slots=True)
class PublishedSet:
    """One version of a set as its owner publishes it.

    Attributes:
        name: The set's name, "<owner>.<set>" by convention.
        version: Counts from 1 in each catalog, one more with every publish.
        members: The legal values (a frozen set, sharded so that the next version shares what it keeps).
        retired: Values the set held once and no longer does (frozen the same way).
        updated_at: When it was published, in seconds since the epoch.
        incarnation: The catalog's incarnation (see ValueSetCatalog).
        replaced_by: For retired values that were replaced: the retired value -> the legal value that replaced it.
        scoped: For a set published per scope (`members_by_scope`, `publish_scope`): each scope's members,
            retired values and replacements; `members`, `retired` and `replaced_by` are then empty. None for a
            global set.
    """

    name: str
    version: int
    members: Set[str]
    retired: Set[str]
    updated_at: float
    incarnation: str = ""
    # A read-only view: the dataclass is frozen, and the mapping must not change under it.
    replaced_by: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    scoped: ScopedMembers | None = field(default=None, hash=False)


_NONE = ShardedMembers()


def _sharded(values: Set[str]) -> ShardedMembers:
    """A global set's members or retired values, as the catalog made them."""
    assert isinstance(values, ShardedMembers)
    return values


def _once(values: Iterable[str]) -> Iterator[str]:
    """Each value once, in the order given."""
    return iter(dict.fromkeys(values))


# What a watcher is queued: a delta (or a scoped set's delta) as its message, or a new set to stream whole.
Announcement = sources_pb2.WatchValueSetsResponse | PublishedSet


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
        self._watchers: set[asyncio.Queue[Announcement]] = set()

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
                scoped and global in turn; or `members_by_scope` is given with members, retired or replaced_by;
                or a value is over MAX_VALUE_CHARS (1,024) characters.
        """
        if members_by_scope is not None:
            if members or retired or replaced_by:
                raise ValueError("members_by_scope replaces the whole set: pass no members, retired or replaced_by")
            return self._publish_scoped(name, members_by_scope, {}, whole=True)
        previous = self._global(name)
        member_set = ShardedMembers(members)
        retired = list(retired)
        check_values(name, member_set, retired, *(replaced_by or {}).items())
        if previous is None:
            replacements = {old: new for old, new in (replaced_by or {}).items() if old not in member_set}
            retired_set = ShardedMembers(value for value in (*retired, *replacements) if value not in member_set)
            published = self._next(name, None, member_set, retired_set, replacements)
            self._announce(published)
            return published
        added = member_set.minus(_sharded(previous.members))
        removed = _sharded(previous.members).minus(member_set)
        return self._change(previous, added, removed, retired, replaced_by or {})

    def add(self, name: str, values: Iterable[str]) -> PublishedSet:
        """Adds members to a set (creating it if it is new), and pushes them to every watching gateway as a
        delta: O(values), whatever the set's size. Values already members are no change; a retired value
        added again is a member, no longer retired.

        Args:
            name: The set's name ("billing.invoice_ids").
            values: The values to add.

        Returns:
            The new version of the set (the same version when nothing changed).

        Raises:
            ValueError: The set is published per scope, or a value is over MAX_VALUE_CHARS (1,024) characters.
        """
        previous = self._global(name)
        if previous is None:
            return self.publish(name, values)
        return self._change(previous, [value for value in _once(values) if value not in previous.members], (), (), {})

    def remove(self, name: str, values: Iterable[str], *, replaced_by: Mapping[str, str] | None = None) -> PublishedSet:
        """Takes members out of a set, and pushes their removal to every watching gateway as a delta:
        O(values), whatever the set's size. A removed member retires: a model that sends it is told it is
        retired (and what replaced it), not that it was invented. Values that are not members are no change.

        Args:
            name: The set's name.
            values: The members to take out.
            replaced_by: Removed value -> the member that replaced it; repair messages name it.

        Returns:
            The new version of the set (the same version when nothing changed).

        Raises:
            ValueError: The set was never published, or is published per scope; or a value is over
                MAX_VALUE_CHARS (1,024) characters.
        """
        previous = self._existing(name)
        removed = [value for value in _once(values) if value in previous.members]
        replacements = {old: new for old, new in (replaced_by or {}).items() if old in removed}
        return self._change(previous, (), removed, (), replacements)

    def retire(self, name: str, values: Iterable[str], *, replaced_by: Mapping[str, str] | None = None) -> PublishedSet:
        """Declares values retired, members or not (a value the set held before this catalog existed, say),
        or names what replaced a retired value; members among them are taken out. Pushed to every watching
        gateway as a delta: O(values), whatever the set's size.

        Args:
            name: The set's name.
            values: The values that are retired.
            replaced_by: Retired value -> the member that replaced it (a value named here is retired too).

        Returns:
            The new version of the set.

        Raises:
            ValueError: The set was never published, or is published per scope; or a value is over
                MAX_VALUE_CHARS (1,024) characters.
        """
        previous = self._existing(name)
        retiring = list(_once([*values, *(replaced_by or {})]))
        removed = [value for value in retiring if value in previous.members]
        return self._change(previous, (), removed, retiring, replaced_by or {})

    def _global(self, name: str) -> PublishedSet | None:
        previous = self._sets.get(name)
        if previous is not None and previous.scoped is not None:
            raise ValueError(f"{name} is published per scope: use members_by_scope or publish_scope")
        return previous

    def _existing(self, name: str) -> PublishedSet:
        previous = self._global(name)
        if previous is None:
            raise ValueError(f"{name} was never published: publish or add its members first")
        return previous

    def _change(
        self,
        previous: PublishedSet,
        added: Sequence[str],
        removed: Sequence[str],
        retiring: Iterable[str],
        replaced_by: Mapping[str, str],
    ) -> PublishedSet:
        """The version after adding `added` (not members), removing `removed` (members: they retire) and
        retiring `retiring` (members or not), with `replaced_by` merged into the replacements; pushed as one
        delta. O(change): the members and retired values are copied only where the change touches them."""
        retiring = list(retiring)
        check_values(previous.name, added, retiring, *replaced_by.items())
        added_now, removed_now = set(added), set(removed)

        def member_after(value: str) -> bool:
            return value in added_now or (value in previous.members and value not in removed_now)

        retiring = [value for value in _once([*removed, *retiring, *replaced_by]) if not member_after(value)]
        replaced_by = {old: new for old, new in replaced_by.items() if not member_after(old)}
        # What watchers are told retires: members removed, values not retired before, and new replacements.
        told = [
            value for value in retiring if value in removed_now or value not in previous.retired or value in replaced_by
        ]
        if not added and not told:
            return previous
        members = _sharded(previous.members).changed(added, removed)
        # Values added again are members, no longer retired, and keep no replacement.
        retired = _sharded(previous.retired).changed(retiring, added)
        replacements: Mapping[str, str] = previous.replaced_by
        if replaced_by or any(value in replacements for value in added):
            replacements = {**replacements, **replaced_by}
            for value in added:
                replacements.pop(value, None)
        published = self._next(previous.name, previous, members, retired, replacements)
        delta = sources_pb2.ValueSetDelta(
            name=published.name,
            from_version=previous.version,
            to_version=published.version,
            added=sorted(added),
            removed=sorted(told),
            replaced_by={old: published.replaced_by[old] for old in told if old in published.replaced_by},
            incarnation=self.incarnation,
        )
        self._announce(sources_pb2.WatchValueSetsResponse(delta=delta))
        return published

    def _next(
        self,
        name: str,
        previous: PublishedSet | None,
        members: ShardedMembers,
        retired: ShardedMembers,
        replaced_by: Mapping[str, str],
    ) -> PublishedSet:
        published = PublishedSet(
            name=name,
            version=(previous.version + 1) if previous else 1,
            members=members,
            retired=retired,
            updated_at=time.time(),
            incarnation=self.incarnation,
            replaced_by=replaced_by if isinstance(replaced_by, MappingProxyType) else MappingProxyType(replaced_by),
        )
        self._sets[name] = published
        return published

    def _announce(self, update: sources_pb2.WatchValueSetsResponse | PublishedSet) -> None:
        """Queues an update for every watcher: a delta, or a set to stream whole (its parts are made as the
        watcher sends them)."""
        for queue in self._watchers:
            queue.put_nowait(update)

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
            members=_NONE,
            retired=_NONE,
            updated_at=time.time(),
            incarnation=self.incarnation,
            scoped=content,
        )
        self._sets[name] = published
        if previous is None:
            self._announce(published)
        else:
            delta.name, delta.from_version, delta.to_version = name, previous.version, published.version
            delta.incarnation = self.incarnation
            self._announce(sources_pb2.WatchValueSetsResponse(delta=delta))
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

    def subscribe(self) -> asyncio.Queue[Announcement]:
        """A queue that gets every change from now on (the servicer's side): a delta as its watch message, a
        new set as its first version (`snapshot_messages` makes its parts)."""
        queue: asyncio.Queue[Announcement] = asyncio.Queue()
        self._watchers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Announcement]) -> None:
        """Stops `queue` getting changes.

        Args:
            queue: What subscribe() returned.
        """
        self._watchers.discard(queue)


# Members per snapshot message on a watch stream: ~200 KB, a tenth of a millisecond to decode (parts of
# 50,000 took over a millisecond each, between the gateway's build steps: docs/performance.md).
PART_MEMBERS = 10_000
# Sets up to this size go out sorted (repeatable messages); larger ones in the order they are held, since
# sorting a million strings is one long C call on the owner's event loop.
SORT_UP_TO = 10_000


def _in_order(values: Collection[str]) -> Iterable[str]:
    return sorted(values) if len(values) <= SORT_UP_TO else values


def to_wire(published: PublishedSet) -> sources_pb2.ValueSet:
    """The whole set in one message (GetValueSet)."""
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
        members=_in_order(published.members),
        retired=_in_order(published.retired),
        retired_values=_retired_values(published),
        updated_at=_timestamp(published.updated_at),
        incarnation=published.incarnation,
    )


def _retired_values(published: PublishedSet) -> list[sources_pb2.RetiredValue]:
    return [sources_pb2.RetiredValue(value=old, replaced_by=new) for old, new in sorted(published.replaced_by.items())]


def snapshot_messages(published: PublishedSet) -> Iterator[sources_pb2.WatchValueSetsResponse]:
    """A snapshot as watch messages: one for a small set, parts of PART_MEMBERS for a large one. Each part is
    made when it is asked for, so a stream that sends them in turn never holds the loop for the whole set; the
    version is frozen, so parts made apart in time still add up to it."""
    if published.scoped is not None:
        yield from _scoped_messages(published, published.scoped)
        return
    if len(published.members) <= PART_MEMBERS:
        yield sources_pb2.WatchValueSetsResponse(snapshot=to_wire(published))
        return
    parts = -(-len(published.members) // PART_MEMBERS)
    values = iter(_in_order(published.members))
    for index in range(parts):
        value_set = _part(published, index, parts)
        value_set.members.extend(islice(values, PART_MEMBERS))
        if index == 0:
            value_set.retired.extend(_in_order(published.retired))
            value_set.retired_values.extend(_retired_values(published))
        yield sources_pb2.WatchValueSetsResponse(snapshot=value_set)


def _scoped_messages(published: PublishedSet, content: ScopedMembers) -> Iterator[sources_pb2.WatchValueSetsResponse]:
    parts = scope_parts(content, PART_MEMBERS)
    if len(parts) == 1:
        yield sources_pb2.WatchValueSetsResponse(snapshot=to_wire(published))
        return
    for index, part in enumerate(parts):
        value_set = _part(published, index, len(parts))
        value_set.scopes.extend(part)
        if index == 0:
            value_set.retired_values.extend(retired_values(content))
        yield sources_pb2.WatchValueSetsResponse(snapshot=value_set)


def _part(published: PublishedSet, index: int, parts: int) -> sources_pb2.ValueSet:
    """Part `index` of a snapshot in `parts`, without its share of the set: every part carries the name,
    version and incarnation; part 0 also the update time (and the caller adds the retired values)."""
    value_set = sources_pb2.ValueSet(
        name=published.name, version=published.version, part=index, parts=parts, incarnation=published.incarnation
    )
    if index == 0:
        value_set.updated_at.CopyFrom(_timestamp(published.updated_at))
    return value_set


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
        # The versions held now, taken together with the subscription: every change queued from here follows
        # them, however long their snapshots take to send.
        held = [self._catalog.get(name) for name in sorted(wanted, reverse=True)]
        try:
            while held:
                # Popped as sent: a version this stream holds on to would keep every shard the catalog has
                # copied since, a second copy of the set per watcher.
                published = held.pop()
                if published is not None:
                    parts, published = snapshot_messages(published), None  # the parts hold it while sent
                    for message in parts:
                        yield message
            while True:
                try:
                    update = await asyncio.wait_for(queue.get(), timeout=self._heartbeat)
                except TimeoutError:
                    yield self._heartbeat_message(wanted)
                    continue
                name = update.name if isinstance(update, PublishedSet) else update.delta.name
                if name not in wanted and request.names:
                    continue
                if isinstance(update, PublishedSet):
                    parts = snapshot_messages(update)
                    del update  # the parts hold it while they are sent, and no longer
                    for message in parts:
                        yield message
                    del parts
                else:
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
