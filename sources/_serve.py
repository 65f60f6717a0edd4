"""One call that puts an owner's catalog and records on a gRPC server, with the health service gateways probe."""

from __future__ import annotations

from typing import NamedTuple

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from argwatch.sources._records import RecordStore
from argwatch.sources._value_sets import ValueSetCatalog, ValueSetSourceServicer
from argwatch.v1 import sources_pb2_grpc


class Serving(NamedTuple):
    """A started owner's server and the port it bound.

    Attributes:
        server: The running gRPC server: stop it with `server.stop(grace)`.
        port: The port it bound (the real one when `listen` ended in `:0`).
    """

    server: grpc.aio.Server
    port: int


async def serve(
    listen: str,
    *,
    catalog: ValueSetCatalog | None = None,
    records: RecordStore | None = None,
    credentials: grpc.ServerCredentials | None = None,
) -> Serving:
    """Starts a server for `catalog` (ValueSetSource) and `records` (RecordSource), with the health service.

    Args:
        listen: The address to bind, "host:port" ("127.0.0.1:0" for any free port).
        catalog: The value sets to serve.
        records: The records to serve.
        credentials: For TLS (`grpc.ssl_server_credentials(...)`); without them the port is plaintext, as
            for a sidecar on loopback.

    Returns:
        The server and the port it bound.

    Raises:
        ValueError: Neither a catalog nor records were given.
    """
    if catalog is None and records is None:
        raise ValueError("serve() needs a catalog, records, or both")
    server = grpc.aio.server()
    if catalog is not None:
        sources_pb2_grpc.add_ValueSetSourceServicer_to_server(ValueSetSourceServicer(catalog), server)
    if records is not None:
        sources_pb2_grpc.add_RecordSourceServicer_to_server(records, server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port(listen) if credentials is None else server.add_secure_port(listen, credentials)
    await server.start()
    return Serving(server, port)
