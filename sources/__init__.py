"""argwatch.sources: what an owning service embeds to publish its value sets and records to argwatch gateways.

An owning service keeps its legal values in a `ValueSetCatalog`: `publish`
replaces a set, `add`, `remove` and `retire` change a few of its values at a
cost in proportion to them (`publish_scope` changes one scope of a set scoped
per customer or tenant); every gateway watching it gets each change as a
delta within a round trip. A system of record answers existence and ownership
look-ups with a `RecordStore` (or its own `RecordSourceServicer`). `serve`
puts both on one gRPC server with the standard health service:

    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WRONG_ITEM"])
    server, port = await serve("0.0.0.0:50061", catalog=catalog)
    await server.wait_for_termination()

`examples/owning_service.py` is a complete owning service on it.
"""

from __future__ import annotations

from argwatch.sources._records import RecordStore
from argwatch.sources._scoped_sets import ScopedMembers
from argwatch.sources._serve import Serving, serve
from argwatch.sources._value_sets import PART_MEMBERS, PublishedSet, ValueSetCatalog, ValueSetSourceServicer

__all__ = [
    "PART_MEMBERS",
    "PublishedSet",
    "RecordStore",
    "ScopedMembers",
    "Serving",
    "ValueSetCatalog",
    "ValueSetSourceServicer",
    "serve",
]
