"""Health and reflection on the Gateway listener, each stream of them capped: no caller can hold them without bound.

Health and reflection are not admitted by admission.py (no load on the
Gateway's methods may refuse a probe), so their streams have caps of their
own: a Health.Watch or a reflection stream holds a place until it ends, and
a caller that opened thousands of them grew the gateway by ~18 KB each. A
Health.Check is unary and ends at once: never capped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

MAX_HEALTH_WATCHES = 64
MAX_REFLECTION_STREAMS = 16


class CappedHealth(health.aio.HealthServicer):  # type: ignore[misc]  # typed as Any by the package
    """grpc.health.v1 as grpcio-health-checking serves it, with at most MAX_HEALTH_WATCHES Watch streams."""

    def __init__(self) -> None:
        super().__init__()
        self.watching = 0

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if self.watching >= MAX_HEALTH_WATCHES:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{MAX_HEALTH_WATCHES} health watches are open; use Health.Check, or retry shortly",
            )
        self.watching += 1
        try:
            await super().Watch(request, context)
        finally:
            self.watching -= 1


class CappedReflection(reflection.aio.ReflectionServicer):  # type: ignore[misc]  # the package ships no types
    """Server reflection, with at most MAX_REFLECTION_STREAMS streams at once."""

    def __init__(self, service_names: list[str]) -> None:
        super().__init__(service_names)
        self.streams = 0

    async def ServerReflectionInfo(
        self, request_iterator: AsyncIterable[reflection_pb2.ServerReflectionRequest], context: Any
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        if self.streams >= MAX_REFLECTION_STREAMS:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"{MAX_REFLECTION_STREAMS} reflection streams are open"
            )
        self.streams += 1
        try:
            async for response in super().ServerReflectionInfo(request_iterator, context):
                yield response
        finally:
            self.streams -= 1


def add_capped_reflection(service_names: list[str], server: grpc.aio.Server) -> None:
    """What reflection.enable_server_reflection does, with CappedReflection."""
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(CappedReflection(service_names), server)
