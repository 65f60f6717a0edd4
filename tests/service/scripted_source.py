"""A real ValueSetSource gRPC server whose watch stream a test writes message by message.

The bundled catalog servicer only ever sends well-formed updates; this one lets
a test send a version gap, a malformed delta or a stale snapshot, refuse to stream at all
(UNIMPLEMENTED) or answer slowly, and counts the GetValueSet calls it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc

from argwatch.v1 import sources_pb2, sources_pb2_grpc


class ScriptedSource(sources_pb2_grpc.ValueSetSourceServicer):
    def __init__(self, sets: dict[str, sources_pb2.ValueSet], *, can_watch: bool = True) -> None:
        self.sets = sets
        self.can_watch = can_watch
        self.fetches = 0
        self.watchers = 0
        self.outbox: asyncio.Queue[sources_pb2.WatchValueSetsResponse] = asyncio.Queue()
        # While slow, GetValueSet answers only after `answer_delay` (or at once when made fast again):
        # a source that is slow, not down.
        self.answer_delay = 0.0
        self.slow_answers = 0
        self.fast_again = asyncio.Event()

    async def GetValueSet(
        self, request: sources_pb2.GetValueSetRequest, context: grpc.aio.ServicerContext
    ) -> sources_pb2.GetValueSetResponse:
        self.fetches += 1
        if self.answer_delay and not self.fast_again.is_set():
            self.slow_answers += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.answer_delay):
                    await self.fast_again.wait()
        if request.name not in self.sets:
            await context.abort(grpc.StatusCode.NOT_FOUND, request.name)
        return sources_pb2.GetValueSetResponse(value_set=self.sets[request.name])

    async def WatchValueSets(
        self, request: sources_pb2.WatchValueSetsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[sources_pb2.WatchValueSetsResponse]:
        if not self.can_watch:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this source only answers GetValueSet")
        self.watchers += 1
        for name in request.names:
            if name in self.sets:
                yield sources_pb2.WatchValueSetsResponse(snapshot=self.sets[name])
        while True:
            yield await self.outbox.get()

    def send_delta(self, name: str, from_version: int, to_version: int, added=(), removed=()) -> None:
        self.outbox.put_nowait(
            sources_pb2.WatchValueSetsResponse(
                delta=sources_pb2.ValueSetDelta(
                    name=name, from_version=from_version, to_version=to_version, added=added, removed=removed
                )
            )
        )

    def send_heartbeat(self, versions: dict[str, int], incarnation: str = "") -> None:
        self.outbox.put_nowait(
            sources_pb2.WatchValueSetsResponse(
                heartbeat=sources_pb2.Heartbeat(versions=versions, incarnation=incarnation)
            )
        )

    def send_snapshot(self, value_set: sources_pb2.ValueSet) -> None:
        self.outbox.put_nowait(sources_pb2.WatchValueSetsResponse(snapshot=value_set))


async def serve(source: ScriptedSource) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    sources_pb2_grpc.add_ValueSetSourceServicer_to_server(source, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"
