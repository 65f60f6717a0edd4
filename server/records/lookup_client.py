"""Record look-ups against the system of record (RecordSource.Lookup), with a short-TTL cache.

A look-up answers found (with the record's attributes), not found, or
unavailable (the source failed or was too slow). All look-ups of one call run
concurrently, each bounded by its source's timeout and the call's deadline;
the ids of one kind a call names together (`items[*].order_id`) go in one
LookupBatch, or one Lookup each from a source without it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import grpc

from argwatch.common.channels import QUICK_RECONNECT_OPTIONS, ChannelSecurity, aio_channel
from argwatch.common.struct_values import struct_to_dict
from argwatch.server.policy.model import GrpcSourceConfig
from argwatch.server.state.ttl_store import TtlStore
from argwatch.v1 import sources_pb2, sources_pb2_grpc


class Lookup(NamedTuple):
    """One look-up's outcome: found with attributes, not found, or unavailable (error says why)."""

    found: bool
    attributes: Mapping[str, Any]
    error: str = ""

    @property
    def available(self) -> bool:
        return not self.error


class RecordLookups(Protocol):
    """What the record checks ask of a source: a RecordClient, or `argwatch policy test`'s records held in
    the test case (an in-process source, so the checks run as the gateway runs them, with no network)."""

    def cached(self, kind: str, record_id: str) -> Lookup | None: ...

    async def lookup_many(self, kind: str, record_ids: Sequence[str], deadline: float | None) -> list[Lookup]: ...


class RecordClient:
    """One channel to one RecordSource, with a cache of answers (found or not) for `ttl` seconds."""

    def __init__(
        self,
        config: GrpcSourceConfig,
        ttl: float,
        monotonic: Callable[[], float] = time.monotonic,
        on_evict: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._clock = clock
        # The policy's `tls: true` holds for look-ups as for value sets (it was once ignored here).
        self._channel = aio_channel(config.target, ChannelSecurity(tls=config.tls), options=QUICK_RECONNECT_OPTIONS)
        self._stub = sources_pb2_grpc.RecordSourceStub(self._channel)
        self._ttl = ttl
        self._batch_unimplemented = False
        # Whether the source answered the latest look-up sent to it: the state now, which the Admin API's
        # status shows (a window's counts of checks that could not run lag a recovery by the whole window).
        self.answering = True
        # The last transport error and when (epoch seconds), kept once the source answers again: the status's
        # source line says "Connection refused" where a look-up's problem says only UNAVAILABLE.
        self.last_error = ""
        self.last_error_at = 0.0
        # Bounded: ids are model-written and may be endless.
        self._cache: TtlStore[tuple[str, str]] = TtlStore(monotonic, max_entries=100_000, on_evict=on_evict)

    def cached(self, kind: str, record_id: str) -> Lookup | None:
        """The cached answer, if one is fresh: no await, so a cache hit costs no trip through the event loop."""
        cached: Lookup | None = self._cache.get((kind, record_id))
        return cached

    async def lookup(self, kind: str, record_id: str, deadline: float | None) -> Lookup:
        """The record; `deadline` is the seconds the caller has left (None: the source's timeout only)."""
        key = (kind, record_id)
        cached: Lookup | None = self._cache.get(key)
        if cached is not None:
            return cached
        timeout = self._timeout(deadline)
        if timeout <= 0:
            return Lookup(False, {}, "no time left in the call's deadline")
        try:
            response = await self._stub.Lookup(sources_pb2.LookupRequest(kind=kind, id=record_id), timeout=timeout)
        except grpc.aio.AioRpcError as error:
            self._failed(error, "Lookup")
            return Lookup(False, {}, f"{self._config.target} Lookup: {error.code().name}")
        except (asyncio.CancelledError, grpc.aio.UsageError):
            if _cancelled_by_caller():
                raise
            return Lookup(False, {}, self._closed("Lookup"))
        self.answering = True
        return self._kept(key, response)

    async def lookup_many(self, kind: str, record_ids: Sequence[str], deadline: float | None) -> list[Lookup]:
        """The records of `record_ids` (distinct) in one round trip (LookupBatch), or one Lookup each,
        concurrently, from a source that does not implement it; in the order asked."""
        if len(record_ids) == 1:
            return [await self.lookup(kind, record_ids[0], deadline)]
        if self._batch_unimplemented:
            return list(await asyncio.gather(*(self.lookup(kind, one, deadline) for one in record_ids)))
        answers: list[Lookup | None] = [self._cache.get((kind, one)) for one in record_ids]
        asked = [one for one, answer in zip(record_ids, answers, strict=True) if answer is None]
        if not asked:
            return [answer for answer in answers if answer is not None]
        timeout = self._timeout(deadline)
        if timeout <= 0:
            fetched = [Lookup(False, {}, "no time left in the call's deadline")] * len(asked)
        else:
            try:
                response = await self._stub.LookupBatch(
                    sources_pb2.LookupBatchRequest(kind=kind, ids=asked), timeout=timeout
                )
            except (asyncio.CancelledError, grpc.aio.UsageError):
                if _cancelled_by_caller():
                    raise
                fetched = [Lookup(False, {}, self._closed("LookupBatch"))] * len(asked)
            except grpc.aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.UNIMPLEMENTED:
                    self._batch_unimplemented = True  # an owner without it: asked one id at a time from now on
                    return await self.lookup_many(kind, record_ids, deadline)
                self._failed(error, "LookupBatch")
                fetched = [Lookup(False, {}, f"{self._config.target} LookupBatch: {error.code().name}")] * len(asked)
            else:
                self.answering = True
                if len(response.records) != len(asked):  # which answer is whose cannot be known: none is used
                    error_text = (
                        f"{self._config.target} LookupBatch: {len(response.records)} answers to {len(asked)} ids"
                    )
                    fetched = [Lookup(False, {}, error_text)] * len(asked)
                else:
                    fetched = [
                        self._kept((kind, one), record) for one, record in zip(asked, response.records, strict=True)
                    ]
        rest = iter(fetched)
        return [answer if answer is not None else next(rest) for answer in answers]

    @property
    def target(self) -> str:
        return self._config.target

    def _failed(self, error: grpc.aio.AioRpcError, method: str) -> None:
        self.answering = False
        # As a value-set source's error reads: the address, the call, the code and gRPC's details.
        self.last_error = f"{self._config.target} {method}: {error.code().name}: {error.details()}"
        self.last_error_at = self._clock()

    def _closed(self, method: str) -> str:
        """A look-up cut short because this client's channel was closed under it (a reload retiring it): the
        check could not run, so the call gets a problem, never a hang until its deadline."""
        self.answering = False
        self.last_error = f"{self._config.target} {method}: the channel was closed before the source answered"
        self.last_error_at = self._clock()
        return self.last_error

    def _timeout(self, deadline: float | None) -> float:
        timeout = self._config.timeout_seconds
        if deadline is not None:
            # Shorter than the caller's own deadline: a look-up that runs out must leave the gateway
            # time to answer with a verdict (the check unavailable), not let the caller's call expire.
            timeout = min(timeout, deadline - answer_margin(deadline))
        return timeout

    def _kept(self, key: tuple[str, str], response: sources_pb2.LookupResponse) -> Lookup:
        """A source's answer as a Lookup, cached for the TTL."""
        attributes = {name: _integral(value) for name, value in struct_to_dict(response.attributes).items()}
        found = Lookup(response.found, attributes if response.found else {})
        self._cache.set(key, found, ttl=self._ttl)
        return found

    @property
    def timeout_seconds(self) -> float:
        return self._config.timeout_seconds

    async def close(self, grace: float | None = None) -> None:
        """Closes the channel; with `grace`, look-ups in flight have that long to end before they are cut."""
        await self._channel.close(grace)


def _cancelled_by_caller() -> bool:
    """Whether a CancelledError is this task's own cancellation. gRPC also raises it (or UsageError, for a
    call started on a closing channel) in a call whose channel was closed, and that is not a cancellation
    of the call being judged: swallowed as one, the gateway's answer was never sent."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def answer_margin(deadline: float) -> float:
    """How much of the caller's remaining time to keep for answering: 10 %, at least 20 ms."""
    return max(0.02, deadline * 0.1)


def _integral(value: object) -> object:
    """Struct numbers arrive as doubles: 1000.0 becomes 1000, so rules compare it with JSON ints as written."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
