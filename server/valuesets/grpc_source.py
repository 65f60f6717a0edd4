"""Value sets from an owning service's ValueSetSource over gRPC: GetValueSet pulls, WatchValueSets streams."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from types import MappingProxyType

import grpc

from argwatch.common.channels import QUICK_RECONNECT_OPTIONS, ChannelSecurity, aio_channel
from argwatch.server.policy.model import GrpcSourceConfig
from argwatch.server.valuesets.parts import MemberParts
from argwatch.server.valuesets.payload import (
    DeltaUpdate,
    HeartbeatUpdate,
    NotServed,
    Retirement,
    SetPayload,
    SnapshotUpdate,
    SourceUnavailable,
    Update,
    WatchUnsupported,
)
from argwatch.v1 import sources_pb2, sources_pb2_grpc

log = logging.getLogger("argwatch.valuesets")

# A million-member set is ~20 MB on the wire; gRPC's default limit is 4 MB.
MAX_SET_MESSAGE_BYTES = 256 * 1024 * 1024


class GrpcSetFetcher:
    """One channel to one ValueSetSource; every pull has the source's timeout."""

    def __init__(self, config: GrpcSourceConfig) -> None:
        self.config = config
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
        assembler = _PartAssembler()
        try:
            async for message in call:
                if message is None:
                    # gRPC hands None for bytes that do not parse as the message: the source is
                    # broken, not merely quiet. Treated as down: reconnected with backoff, counted.
                    raise SourceUnavailable(f"{self.config.target} WatchValueSets: a message that does not parse")
                kind = message.WhichOneof("update")
                if kind == "snapshot":
                    whole = assembler.add(message.snapshot)
                    if whole is not None:
                        yield SnapshotUpdate(whole)
                        # Held past this point, the assembled parts would keep the set's whole wire
                        # copy alive until the next snapshot (~66 bytes a member at 1M members).
                        whole = None
                elif kind == "delta":
                    delta = message.delta
                    yield DeltaUpdate(
                        delta.name,
                        delta.from_version,
                        delta.to_version,
                        tuple(delta.added),
                        tuple(delta.removed),
                        MappingProxyType(dict(delta.replaced_by)),
                        delta.incarnation,
                    )
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


class _PartAssembler:
    """Joins a snapshot sent in parts (ValueSet.part/parts) back into one payload, without copying members."""

    def __init__(self) -> None:
        self._first: sources_pb2.ValueSet | None = None
        self._members: list[Sequence[str]] = []

    def add(self, value_set: sources_pb2.ValueSet) -> SetPayload | None:
        """The whole set once its last part arrived (at once for an unsplit one); None meanwhile."""
        if value_set.parts <= 1:
            self._first = None
            return payload_from_wire(value_set, value_set.name)
        if value_set.part == 0:
            self._first, self._members = value_set, []
        first = self._first
        if (
            first is None
            or (value_set.name, value_set.version, value_set.incarnation)
            != (first.name, first.version, first.incarnation)
            or (value_set.part != len(self._members))
        ):
            # A part out of order or of another set: drop what was gathered; the next full
            # snapshot (or a resync) brings the set, and the last good copy stays meanwhile.
            log.warning(
                "source sent part %d/%d of %s v%d out of order: discarded",
                value_set.part,
                value_set.parts,
                value_set.name,
                value_set.version,
            )
            self._first, self._members = None, []
            return None
        self._members.append(value_set.members)
        if len(self._members) < value_set.parts:
            return None
        payload = payload_from_wire(first, first.name)
        # Let go of the parts here: held until the next snapshot, they would keep the whole
        # wire copy of the set alive (~66 bytes a member at 1M) long after it was indexed.
        parts, self._first, self._members = self._members, None, []
        return SetPayload(
            payload.name,
            payload.version,
            MemberParts(parts),
            payload.retired,
            payload.retirements,
            incarnation=payload.incarnation,
        )


def payload_from_wire(value_set: sources_pb2.ValueSet, name: str) -> SetPayload:
    retirements = {
        retired.value: Retirement(
            retired.retired_at.ToNanoseconds() / 1e9 if retired.HasField("retired_at") else None,
            retired.replaced_by,
        )
        for retired in value_set.retired_values
        if retired.value
    }
    return SetPayload(
        name,
        value_set.version,
        # The repeated field itself: converted to str objects a chunk at a time while indexing.
        value_set.members,
        tuple(value_set.retired),
        MappingProxyType(retirements),
        incarnation=value_set.incarnation,
    )
