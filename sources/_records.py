"""RecordStore: a RecordSource servicer over records held in memory, for a system of record to embed (and the demo)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from google.protobuf import struct_pb2

from argwatch.v1 import sources_pb2, sources_pb2_grpc


class RecordStore(sources_pb2_grpc.RecordSourceServicer):
    """Records by (kind, id), for the gateway's existence and ownership look-ups; `put` changes them while serving.

    Attributes:
        lookups: How many records it has looked up (each id of a batch counts).
        batches: How many LookupBatch calls it has answered.
    """

    def __init__(self, records: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> None:
        """Holds `records` in memory.

        Args:
            records: (kind, id) -> the record's attributes, as the policy's rules and ownership checks read them
                ({("order", "ord_1"): {"customer_id": "cus_7"}}).
        """
        self._records: dict[tuple[str, str], Mapping[str, Any]] = dict(records or {})
        self.lookups = 0
        self.batches = 0

    def put(self, kind: str, record_id: str, attributes: Mapping[str, Any]) -> None:
        """Adds or replaces one record; the next look-up sees it.

        Args:
            kind: The record's kind, as the policy names it ("order").
            record_id: The record's id.
            attributes: Its attributes (JSON values).
        """
        self._records[kind, record_id] = dict(attributes)

    async def LookupBatch(
        self,
        request: sources_pb2.LookupBatchRequest,
        context: grpc.aio.ServicerContext[sources_pb2.LookupBatchRequest, sources_pb2.LookupBatchResponse],
    ) -> sources_pb2.LookupBatchResponse:
        """RecordSource.LookupBatch: one answer per id asked for, in order.

        Args:
            request: The kind and the ids asked for.
            context: gRPC's context of the call.
        """
        self.lookups += len(request.ids)
        self.batches += 1
        return sources_pb2.LookupBatchResponse(records=[self._answer(request.kind, i) for i in request.ids])

    async def Lookup(
        self,
        request: sources_pb2.LookupRequest,
        context: grpc.aio.ServicerContext[sources_pb2.LookupRequest, sources_pb2.LookupResponse],
    ) -> sources_pb2.LookupResponse:
        """RecordSource.Lookup: the record's attributes, or found=False.

        Args:
            request: The kind and id asked for.
            context: gRPC's context of the call.
        """
        self.lookups += 1
        return self._answer(request.kind, request.id)

    def _answer(self, kind: str, record_id: str) -> sources_pb2.LookupResponse:
        found = self._records.get((kind, record_id))
        if found is None:
            return sources_pb2.LookupResponse(found=False)
        attributes = struct_pb2.Struct()
        attributes.update(found)
        return sources_pb2.LookupResponse(found=True, attributes=attributes)
