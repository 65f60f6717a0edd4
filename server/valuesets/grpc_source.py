"""Value sets pulled from an owning service's ValueSetSource over gRPC (GetValueSet)."""

from __future__ import annotations

import grpc

from argwatch.server.policy_model import GrpcSourceConfig
from argwatch.server.valuesets.payload import SetPayload, SourceUnavailable
from argwatch.v1 import sources_pb2, sources_pb2_grpc


class GrpcSetFetcher:
    """One channel to one ValueSetSource; every fetch has the source's timeout."""

    def __init__(self, config: GrpcSourceConfig) -> None:
        self.config = config
        credentials = grpc.ssl_channel_credentials() if config.tls else None
        self._channel = (
            grpc.aio.secure_channel(config.target, credentials)
            if credentials
            else grpc.aio.insecure_channel(config.target)
        )
        self._stub = sources_pb2_grpc.ValueSetSourceStub(self._channel)

    async def fetch(self, name: str) -> SetPayload:
        try:
            response = await self._stub.GetValueSet(
                sources_pb2.GetValueSetRequest(name=name), timeout=self.config.timeout_seconds
            )
        except grpc.aio.AioRpcError as error:
            raise SourceUnavailable(
                f"{self.config.target} GetValueSet({name}): {error.code().name}: {error.details()}"
            ) from None
        value_set = response.value_set
        if value_set.name and value_set.name != name:
            raise SourceUnavailable(f"{self.config.target} answered {value_set.name!r} when asked for {name!r}")
        return SetPayload(name, value_set.version, tuple(value_set.members), tuple(value_set.retired))

    async def close(self) -> None:
        await self._channel.close()
