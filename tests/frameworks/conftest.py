"""A gateway for the framework gates' tests: refund_order in reject mode, its reason code bound to the
`source` fixture's set, and its order looked up in a real RecordSource that says who owns it. A gate that
did not pass the customer through would have the corrected call refused (another customer's order), and the tool
never run.
refund_order has side effects, so the gates that run the tool report its outcome."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import grpc
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.sources import RecordStore
from argwatch.v1 import sources_pb2_grpc
from tests.conftest import SourceServer, gateway_on
from tests.frameworks.expectations import CUSTOMER, ORDER

POLICY = """
sources:
  owners: {{grpc: {{target: "{sets}", timeout: 2s}}}}
  orders_db: {{grpc: {{target: "{records}", timeout: 2s}}}}
value_sets:
  refunds.reason_codes: {{source: owners, ttl: 5m}}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {{value_set: refunds.reason_codes}}
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, owner: customer_id, failure: closed}}
    side_effect: true            # a refund: the gates that run the tool report how it went
repair: {{list_limit: 20, nearest: 3, max_attempts: 3}}
sampling: {{rate: 1.0}}
"""


@pytest.fixture
async def owned_gateway(tmp_path: os.PathLike[str], source: SourceServer) -> AsyncIterator[RunningGateway]:
    records = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(
        RecordStore({("order", ORDER): {"customer_id": CUSTOMER}}), records
    )
    port = records.add_insecure_port("127.0.0.1:0")
    await records.start()
    gateway = await gateway_on(tmp_path, POLICY.format(sets=source.target, records=f"127.0.0.1:{port}"))
    yield gateway
    await gateway.stop(0)
    await records.stop(0)
