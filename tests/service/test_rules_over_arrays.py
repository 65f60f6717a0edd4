"""Rules over the call's line items and the order's record, over real gRPC: a total above the amount paid is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import orjson
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.sources import RecordStore
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import sources_pb2_grpc
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, value

ORDERS = {("order", "ord_1"): {"customer_id": "cus_A", "paid_cents": 1000, "lines": [{"sku": "SKU-1"}]}}

POLICY = """
sources:
  orders_db: {{grpc: {{target: "{target}", timeout: 1s}}}}
limits: {{max_elements: 4}}
tools:
  refund_items:
    mode: reject
    schema:
      type: object
      properties:
        order_id: {{type: string}}
        items:
          type: array
          items:
            type: object
            properties: {{sku: {{type: string}}, quantity: {{type: integer}}, price_cents: {{type: integer}}}}
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, owner: customer_id, failure: closed}}
    rules:
      - name: total_not_above_paid
        expr: sum(args.items.map(i, i.price_cents * i.quantity)) <= record.order.paid_cents
        message: "the items total more than the {{record.order.paid_cents}} cents paid"
        argument: items
        code: out_of_range
      - name: quantity_positive
        each: items[*]
        expr: item.quantity > 0
        message: "quantity {{item.quantity}} is not positive"
        argument: items[*].quantity
        code: out_of_range
      - name: sold_on_the_order
        each: items[*]
        expr: record.order.lines.exists(l, l.sku == item.sku)
        message: "{{item.sku}} is not a line of {{args.order_id}}"
        argument: items[*].sku
"""


@pytest.fixture
async def gateway(tmp_path) -> AsyncIterator[RunningGateway]:
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(RecordStore(ORDERS), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    running = await gateway_on(tmp_path, POLICY.format(target=f"127.0.0.1:{port}"))
    yield running
    await running.stop(0)
    await server.stop(0)


async def call(gateway: RunningGateway, items: list[dict[str, object]]) -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(
            pb.ValidateRequest(
                tool="refund_items",
                arguments_json=orjson.dumps({"order_id": "ord_1", "items": items}),
                session=pb.Session(customer_id="cus_A"),
            ),
            timeout=5,
        )
        return response


def line(quantity: object = 1, price_cents: int = 400, sku: str = "SKU-1") -> dict[str, object]:
    return {"sku": sku, "quantity": quantity, "price_cents": price_cents}


async def test_items_within_the_amount_paid_pass(gateway: RunningGateway) -> None:
    response = await call(gateway, [line(), line()])
    assert response.decision == pb.DECISION_ALLOW and list(response.problems) == []


async def test_items_totalling_more_than_was_paid_are_refused(gateway: RunningGateway) -> None:
    response = await call(gateway, [line(), line(quantity=2)])
    assert response.decision == pb.DECISION_REJECT
    assert [(p.code, p.argument) for p in response.problems] == [(pb.PROBLEM_CODE_OUT_OF_RANGE, "items")]
    assert response.problems[0].message == "items: the items total more than the 1000 cents paid"


async def test_each_failing_element_is_named_by_its_path(gateway: RunningGateway) -> None:
    response = await call(gateway, [line(), line(quantity=0, price_cents=0), line(sku="SKU-9", price_cents=0)])
    assert [(p.code, p.argument) for p in response.problems] == [
        (pb.PROBLEM_CODE_OUT_OF_RANGE, "items[1].quantity"),
        (pb.PROBLEM_CODE_RULE_FAILED, "items[2].sku"),
    ]
    assert response.problems[1].message == "items[2].sku: SKU-9 is not a line of ord_1"
    # Labels carry the pattern, never an index.
    labels = {"tool": "refund_items", "argument": "items[*].quantity", "code": "out_of_range"}
    assert value(gateway.registry, "tool_argument_problems_total", **labels) == 1


async def test_a_quantity_sent_as_text_is_not_compared(gateway: RunningGateway) -> None:
    response = await call(gateway, [line(quantity="1")])
    assert response.decision == pb.DECISION_REJECT
    # One fault, one problem: the schema's WRONG_TYPE; the rules that could not read it are not listed again.
    assert [(p.code, p.argument) for p in response.problems] == [(pb.PROBLEM_CODE_WRONG_TYPE, "items[0].quantity")]


async def test_more_items_than_the_bound_are_not_passed_in_silence(gateway: RunningGateway) -> None:
    response = await call(gateway, [line(price_cents=0)] * 5)
    assert response.decision == pb.DECISION_REJECT
    assert "items has 5 elements; a rule judges at most 4 (limits.max_elements)" in response.problems[0].message
