"""The demo owning service: a real ValueSetSource gRPC server publishing refunds and identity sets.

python examples/demo_source.py --listen 127.0.0.1:50061
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

import grpc
from grpc_health.v1 import health, health_pb2_grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_data import REASON_CODES, RETIRED_REASON_CODES, active_handles

from argwatch.server.servicers.value_set_source import (
    ValueSetCatalog,
    ValueSetSourceServicer,
)
from argwatch.v1 import sources_pb2_grpc


def demo_catalog() -> ValueSetCatalog:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", REASON_CODES, RETIRED_REASON_CODES)
    catalog.publish("identity.active_handles", active_handles())
    return catalog


async def serve(listen: str) -> None:
    server = grpc.aio.server()
    sources_pb2_grpc.add_ValueSetSourceServicer_to_server(ValueSetSourceServicer(demo_catalog()), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(listen)
    await server.start()
    logging.info("demo owning service on %s", listen)
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    await stopping.wait()
    await server.stop(1.0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:50061")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s demo-source: %(message)s")
    asyncio.run(serve(parser.parse_args().listen))
