"""The full gate the benchmarks measure: membership, a JSON Schema, a cached record look-up and two CEL rules."""

from __future__ import annotations

import os
import tempfile

import grpc

from argwatch.sources import RecordStore
from argwatch.v1 import sources_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))

POLICY = """
sources:
  local: {{file: {sets}}}
  orders_db: {{grpc: {{target: "127.0.0.1:{port}", timeout: 1s}}}}
value_sets:
  refunds.reason_codes: {{source: local, ttl: 1h}}
tools:
  refund_order:
    arguments:
      reason_code: {{value_set: refunds.reason_codes}}
    schema:
      type: object
      properties:
        order_id: {{type: string, pattern: "^ord_[0-9]+$"}}
        reason_code: {{type: string}}
        amount_cents: {{type: integer, minimum: 1}}
        note: {{type: string, maxLength: 500}}
      required: [order_id, reason_code, amount_cents]
      additionalProperties: false
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, owner: customer_id, ttl: 1h}}
    rules:
      - {{name: not_above_paid, expr: "args.amount_cents <= record.order.paid_cents", argument: amount_cents,
          code: out_of_range}}
      - {{name: not_refunded, expr: "record.order.status != 'refunded'", argument: order_id}}
"""


async def start_records() -> tuple[grpc.aio.Server, int]:
    """The system of record for the gate: one order, owned by the payload's customer."""
    store = RecordStore(
        {("order", "ord_0012345678"): {"customer_id": "cus_000123", "paid_cents": 20000, "status": "paid"}}
    )
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(store, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def write_policy(port: int) -> str:
    path = os.path.join(tempfile.mkdtemp(), "gate.yaml")
    with open(path, "w") as handle:
        handle.write(POLICY.format(sets=os.path.join(HERE, "value_sets.yaml"), port=port))
    return path
