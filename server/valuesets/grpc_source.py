"""Value sets from an owning service's ValueSetSource over gRPC: GetValueSet pulls, WatchValueSets streams."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, ItemsView, Iterator, Mapping, Sequence
from types import MappingProxyType

import grpc

from argwatch.common.channels import QUICK_RECONNECT_OPTIONS, ChannelSecurity, aio_channel
from argwatch.server.policy.model import GrpcSourceConfig
from argwatch.server.sets.payload import (
    DeltaUpdate,
    HeartbeatUpdate,
    NotServed,
    OversizedDelta,
    OversizedSnapshot,
    Retirement,
    SetPayload,
    SnapshotUpdate,
    SourceUnavailable,
    Update,
    WatchUnsupported,
)
from argwatch.server.sets.scoped import scope_key, usable_scope
from argwatch.server.valuesets.parts import MemberParts, ScopeKeys
from argwatch.v1 import sources_pb2, sources_pb2_grpc

log = logging.getLogger("argwatch.valuesets")

# A million-member set is ~20 MB on the wire; gRPC's default limit is 4 MB.
MAX_SET_MESSAGE_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_MEMBERS = 5_000_000  # value_sets.<name>.max_members' default, for a fetcher given no limits
# The most values one delta may add, remove or replace: a larger change comes as a snapshot. A delta is
# converted and judged in one pass on the event loop, so this bounds that pass (docs/performance.md).
MAX_DELTA_VALUES = 100_000


class GrpcSetFetcher:
    """One channel to one ValueSetSource; every pull has the source's timeout. `max_members` gives each set's
    limit (the policy's max_members), which a snapshot sent in parts must keep to while it arrives."""

    def __init__(self, config: GrpcSourceConfig, max_members: Mapping[str, int] | None = None) -> None:
        self.config = config
        self._max_members = max_members  # None: any set, each within DEFAULT_MAX_MEMBERS (tools, tests)
        options = [("grpc.max_receive_message_length", MAX_SET_MESSAGE_BYTES), *QUICK_RECONNECT_OPTIONS]
        self._channel = aio_channel(config.target, ChannelSecurity(tls=config.tls), options=options)
        self._stub = sources_pb2_grpc.ValueSetSourceStub(self._channel)

    async def fetch(self, name: str) -> SetPayload:
        try:
            response = await self._stub.GetValueSet(
                sources_pb2.GetValueSetRequest(name=name), timeout=self.config.timeout_seconds
            )
        except grpc.aio.AioRpcError as error:
            failure = NotServed if error.code() == grpc.StatusCode.NOT_FOUND else SourceUnavailable
            raise failure(f"{self.config.target} GetValueSet({name}): {error.code().name}: {error.details()}") from None
        value_set = response.value_set
        if value_set.name and value_set.name != name:
            raise SourceUnavailable(f"{self.config.target} answered {value_set.name!r} when asked for {name!r}")
        return payload_from_wire(value_set, name)

    async def watch(self, names: list[str]) -> AsyncGenerator[Update]:
        """The source's stream, as domain updates, until it ends or fails."""
        call = self._stub.WatchValueSets(sources_pb2.WatchValueSetsRequest(names=names))
        assembler = _PartAssembler(self._max_members)
        try:
            async for message in call:
                if message is None:
                    # gRPC hands None for bytes that do not parse as the message: the source is
                    # broken, not merely quiet. Treated as down: reconnected with backoff, counted.
                    raise SourceUnavailable(f"{self.config.target} WatchValueSets: a message that does not parse")
                kind = message.WhichOneof("update")
                if kind == "snapshot":
                    whole = assembler.add(message.snapshot)
                    if isinstance(whole, OversizedSnapshot):
                        yield whole
                    elif whole is not None:
                        yield SnapshotUpdate(whole)
                        # Held past this point, the assembled parts would keep the set's whole wire
                        # copy alive until the next snapshot (~66 bytes a member at 1M members).
                        whole = None
                elif kind == "delta":
                    delta = message.delta
                    size = len(delta.added) + len(delta.removed) + len(delta.replaced_by)
                    size += len(delta.scoped_added) + len(delta.scoped_removed)
                    if size <= MAX_DELTA_VALUES and (delta.scoped_added or delta.scoped_removed):
                        size += _scoped_size(delta)  # a pass over at most MAX_DELTA_VALUES entries
                    if size > MAX_DELTA_VALUES:  # counted with len(): nothing of it converted
                        yield OversizedDelta(delta.name, delta.to_version, delta.incarnation, size)
                        continue
                    yield delta_from_wire(delta)
                elif kind == "heartbeat":
                    heartbeat = message.heartbeat
                    yield HeartbeatUpdate(MappingProxyType(dict(heartbeat.versions)), heartbeat.incarnation)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise WatchUnsupported(self.config.target) from None
            raise SourceUnavailable(
                f"{self.config.target} WatchValueSets: {error.code().name}: {error.details()}"
            ) from None
        finally:
            call.cancel()
        raise SourceUnavailable(f"{self.config.target} ended the WatchValueSets stream")

    async def close(self) -> None:
        await self._channel.close()


class _Gathering:
    """The parts of one set's snapshot received so far."""

    def __init__(self, first: sources_pb2.ValueSet) -> None:
        self.first = first
        self.members: list[Sequence[str]] = []
        self.count = 0  # members
        self.bytes = 0  # of the part messages held (each list of members keeps its whole message alive)


class _PartAssembler:
    """Joins a snapshot sent in parts (ValueSet.part/parts) back into one payload, without copying members.

    One gathering per set (sources.proto lets other sets' messages come between one set's parts), for the
    sets the gateway watches only. What a gathering holds is bounded as it arrives: by the set's max_members
    in members, by MAX_SET_MESSAGE_BYTES in bytes (what one unsplit snapshot may be), and a part after the
    first may carry neither retired values (part 0's alone) nor nothing at all. A snapshot declared in a
    billion parts of 100,000 members each once grew the gateway without end while the set read as fresh.
    Past a bound the parts are let go and the snapshot refused (OversizedSnapshot), its cause in GetStatus.
    """

    def __init__(self, max_members: Mapping[str, int] | None) -> None:
        self._max_members = max_members
        self._gathering: dict[str, _Gathering] = {}

    def add(self, value_set: sources_pb2.ValueSet) -> SetPayload | OversizedSnapshot | None:
        """The whole set once its last part arrived (at once for an unsplit one); None meanwhile."""
        name = value_set.name
        if value_set.parts <= 1:
            self._gathering.pop(name, None)
            return payload_from_wire(value_set, name)
        limit = self._max_members.get(name) if self._max_members is not None else DEFAULT_MAX_MEMBERS
        if limit is None:  # not a set this gateway watches: nothing of it is kept (the provider counts it)
            return OversizedSnapshot(name, value_set.version, value_set.incarnation, len(value_set.members))
        if value_set.part == 0:
            self._gathering[name] = _Gathering(value_set)
        gathering = self._gathering.get(name)
        if (
            gathering is None
            or (value_set.version, value_set.incarnation) != (gathering.first.version, gathering.first.incarnation)
            or value_set.part != len(gathering.members)
        ):
            # A part out of order: drop what was gathered; the next full snapshot (or a resync) brings the
            # set, and the last good copy stays meanwhile.
            log.warning(
                "source sent part %d/%d of %s v%d out of order: discarded",
                value_set.part,
                value_set.parts,
                name,
                value_set.version,
            )
            self._gathering.pop(name, None)
            return None
        members = _members_of(value_set)
        gathering.members.append(members)
        gathering.count += len(members)
        gathering.bytes += value_set.ByteSize()
        malformed = value_set.part > 0 and (
            not members
            or len(value_set.retired)
            or len(value_set.retired_values)
            or bool(value_set.scopes) is not bool(gathering.first.scopes)  # every part per scope, or none
        )
        if malformed or gathering.count > limit or gathering.bytes > MAX_SET_MESSAGE_BYTES:
            self._gathering.pop(name, None)
            return OversizedSnapshot(name, gathering.first.version, gathering.first.incarnation, gathering.count)
        if len(gathering.members) < value_set.parts:
            return None
        # Let go of the parts here: held until the next snapshot, they would keep the whole
        # wire copy of the set alive (~66 bytes a member at 1M) long after it was indexed.
        del self._gathering[name]
        payload = payload_from_wire(gathering.first, name)
        return SetPayload(
            payload.name,
            payload.version,
            MemberParts(gathering.members),
            payload.retired,
            payload.retirements,
            incarnation=payload.incarnation,
            scoped=payload.scoped,
        )


def payload_from_wire(value_set: sources_pb2.ValueSet, name: str) -> SetPayload:
    scoped = bool(value_set.scopes)
    if scoped and len(value_set.members):
        # Both a scoped and a global set: the scopes cannot be trusted, nor can the rest. Refused at install
        # (scope_mismatch for a scoped set, whose members are never bare values).
        return SetPayload(name, value_set.version, value_set.members, incarnation=value_set.incarnation)
    return SetPayload(
        name,
        value_set.version,
        # The repeated fields themselves: converted to str objects a chunk at a time while indexing (and
        # counted with len() before that), never in one pass on the event loop.
        _members_of(value_set),
        value_set.retired,
        WireRetirements(value_set.retired_values),
        incarnation=value_set.incarnation,
        scoped=scoped,
    )


def _members_of(value_set: sources_pb2.ValueSet) -> Sequence[str]:
    """The members, or a scoped set's scope keys (read a slice at a time: one pass here over its scopes)."""
    if not value_set.scopes:
        return value_set.members
    return ScopeKeys([(entry.scope, entry.members) for entry in value_set.scopes])


def _scoped_size(delta: sources_pb2.ValueSetDelta) -> int:
    return sum(len(entry.members) + len(entry.replaced_by) for entry in (*delta.scoped_added, *delta.scoped_removed))


def delta_from_wire(delta: sources_pb2.ValueSetDelta) -> DeltaUpdate:
    """A delta as the domain takes it; a scoped set's as scope keys. An unusable scope, or bare values beside
    scoped ones, read as keys of the empty scope, which judge_delta refuses (bad_scope)."""
    if not (delta.scoped_added or delta.scoped_removed):
        return DeltaUpdate(
            delta.name,
            delta.from_version,
            delta.to_version,
            tuple(delta.added),
            tuple(delta.removed),
            MappingProxyType(dict(delta.replaced_by)),
            delta.incarnation,
        )
    replaced_by = {
        scope_key(entry.scope if usable_scope(entry.scope) else "", old): new
        for entry in delta.scoped_removed
        for old, new in entry.replaced_by.items()
    }
    return DeltaUpdate(
        delta.name,
        delta.from_version,
        delta.to_version,
        (*ScopeKeys([(entry.scope, entry.members) for entry in delta.scoped_added]), *_unscoped(delta.added)),
        (*ScopeKeys([(entry.scope, entry.members) for entry in delta.scoped_removed]), *_unscoped(delta.removed)),
        MappingProxyType(replaced_by),
        delta.incarnation,
        scoped=True,
    )


def _unscoped(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(scope_key("", value) for value in values)


class WireRetirements(Mapping[str, Retirement]):
    """A ValueSet's retired_values as a mapping read lazily: len() is free, and items() converts one entry at a
    time, so the snapshot builder takes them a chunk at a time (a look-up by value, which nothing on the hot
    path makes, indexes them once)."""

    def __init__(self, entries: Sequence[sources_pb2.RetiredValue]) -> None:
        self._entries = entries
        self._index: dict[str, Retirement] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return (_retired_key(entry) for entry in self._entries if entry.value)

    def __getitem__(self, value: str) -> Retirement:
        if self._index is None:
            self._index = dict(self.items())
        return self._index[value]

    def items(self) -> ItemsView[str, Retirement]:
        return _LazyItems(self._entries)

    def tail(self, count: int) -> WireRetirements:
        """The last `count` entries (a slice of the wire's list: the others are never converted)."""
        return WireRetirements(self._entries[len(self._entries) - count :])


class _LazyItems(ItemsView[str, Retirement]):
    def __init__(self, entries: Sequence[sources_pb2.RetiredValue]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[tuple[str, Retirement]]:
        for entry in self._entries:
            if entry.value:
                retired_at = entry.retired_at.ToNanoseconds() / 1e9 if entry.HasField("retired_at") else None
                yield _retired_key(entry), Retirement(retired_at, entry.replaced_by)


def _retired_key(entry: sources_pb2.RetiredValue) -> str:
    """A retired value as the set holds it: a scoped set's as its scope's key (the scope as sent: an unusable
    one matches no member's key, so no call's value either)."""
    return scope_key(entry.scope, entry.value) if entry.scope else entry.value
