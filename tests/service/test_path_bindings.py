"""Bindings by path over real gRPC: array elements, nested fields, each id looked up in one batch, bounded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import grpc
import orjson
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.sources import RecordStore
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import sources_pb2, sources_pb2_grpc
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, value

SETS = """
catalogue.skus: {version: 1, members: [SKU-1, SKU-2, SKU-3]}
geo.countries: {version: 1, members: [DE, FR]}
"""

POLICY = """
sources:
  local: {{file: sets.yaml}}
  orders_db: {{grpc: {{target: "{target}", timeout: 2s}}}}
value_sets:
  catalogue.skus: {{source: local}}
  geo.countries: {{source: local}}
limits: {{max_elements: {limit}}}
tools:
  create_order:
    mode: reject
    schema:
      type: object
      required: [items]
      properties:
        items:
          type: array
          items:
            type: object
            required: [sku, quantity]
            properties: {{sku: {{type: string}}, quantity: {{type: integer}}}}
        shipping:
          type: object
          properties: {{country: {{type: string}}}}
        related_orders: {{type: array, items: {{type: string}}}}
    arguments:
      items[*].sku: {{value_set: catalogue.skus}}
      shipping.country: {{value_set: geo.countries}}
    records:
      related: {{source: orders_db, kind: order, id_argument: "related_orders[*]", owner: customer_id,
                 failure: closed}}
    rules:
      - name: few_related
        expr: size(record.related) <= 50
        argument: related_orders
        code: out_of_range
      - name: none_refunded
        expr: "!record.related.exists(o, o.status == 'refunded')"
        argument: related_orders
"""

ORDERS = {("order", f"ord_{n}"): {"customer_id": "cus_A", "status": "paid", "paid": 100} for n in range(60)} | {
    ("order", "ord_B"): {"customer_id": "cus_B", "status": "paid", "paid": 100},
    ("order", "ord_R"): {"customer_id": "cus_A", "status": "refunded", "paid": 100},
}


class NoBatch(sources_pb2_grpc.RecordSourceServicer):
    """An owner built before LookupBatch: only Lookup."""

    def __init__(self) -> None:
        self.store = RecordStore(ORDERS)

    async def Lookup(
        self,
        request: sources_pb2.LookupRequest,
        context: grpc.aio.ServicerContext[sources_pb2.LookupRequest, sources_pb2.LookupResponse],
    ) -> sources_pb2.LookupResponse:
        return await self.store.Lookup(request, context)


async def _records_server(servicer: sources_pb2_grpc.RecordSourceServicer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
async def store() -> AsyncIterator[tuple[RecordStore, str]]:
    records = RecordStore(ORDERS)
    server, target = await _records_server(records)
    yield records, target
    await server.stop(0)


async def _gateway(tmp_path, target: str, limit: int = 256) -> RunningGateway:
    (tmp_path / "sets.yaml").write_text(SETS)
    return await gateway_on(tmp_path, POLICY.format(target=target, limit=limit))


async def _call(gateway: RunningGateway, args: Mapping[str, object]) -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(
            pb.ValidateRequest(
                tool="create_order", arguments_json=orjson.dumps(args), session=pb.Session(customer_id="cus_A")
            ),
            timeout=5,
        )
        return response


def _found(response: pb.ValidateResponse) -> list[tuple[int, str]]:
    return [(p.code, p.argument) for p in response.problems]


async def test_each_element_is_checked_and_a_problem_names_its_path(tmp_path, store) -> None:
    gateway = await _gateway(tmp_path, store[1])
    try:
        clean = {"items": [{"sku": "SKU-1", "quantity": 1}, {"sku": "SKU-3", "quantity": 2}]}
        assert (await _call(gateway, clean)).decision == pb.DECISION_ALLOW
        wrong = {
            "items": [{"sku": "SKU-1", "quantity": 1}, {"sku": "sku-2", "quantity": 1}, {"sku": "NOPE", "quantity": 1}],
            "shipping": {"country": "XX"},
        }
        response = await _call(gateway, wrong)
        assert response.decision == pb.DECISION_REJECT
        assert _found(response) == [
            (pb.PROBLEM_CODE_OUT_OF_SET, "items[1].sku"),
            (pb.PROBLEM_CODE_OUT_OF_SET, "items[2].sku"),
            (pb.PROBLEM_CODE_OUT_OF_SET, "shipping.country"),
        ]
        assert response.problems[0].suggestion == "SKU-2"  # a separator/case slip, named per element
        assert response.problems[1].message.startswith('items[2].sku: "NOPE" is not in catalogue.skus')
        # Metrics label the binding's pattern, never an index.
        labels = {"tool": "create_order", "argument": "items[*].sku"}
        assert value(gateway.registry, "tool_argument_problems_total", **labels, code="out_of_set") == 2
        checks = "tool_argument_value_check_total"
        in_skus = {**labels, "set": "catalogue.skus"}
        assert value(gateway.registry, checks, **in_skus, in_set="true", in_set_normalised="true") == 3
        assert value(gateway.registry, checks, **in_skus, in_set="false", in_set_normalised="true") == 1
        exposition = gateway.registry.get_sample_value  # no series carries a concrete index
        assert exposition("tool_argument_problems_total", {**labels, "argument": "items[2].sku"}) is None
    finally:
        await gateway.stop(0)


async def test_an_absent_optional_path_is_no_problem_and_a_present_one_of_the_wrong_type_is(tmp_path, store) -> None:
    gateway = await _gateway(tmp_path, store[1])
    try:
        no_shipping = {"items": [{"sku": "SKU-1", "quantity": 1}]}
        assert _found(await _call(gateway, no_shipping)) == []
        shipping_text = {"items": [{"sku": "SKU-1", "quantity": 1}], "shipping": "Berlin"}
        assert _found(await _call(gateway, shipping_text)) == [(pb.PROBLEM_CODE_WRONG_TYPE, "shipping")]
        sku_number = {"items": [{"sku": 7, "quantity": 1}], "shipping": {"country": ["DE"]}}
        assert _found(await _call(gateway, sku_number)) == [
            (pb.PROBLEM_CODE_WRONG_TYPE, "items[0].sku"),
            (pb.PROBLEM_CODE_WRONG_TYPE, "shipping.country"),
        ]
        no_sku = {"items": [{"quantity": 1}]}  # the schema requires it: one problem, not one per check
        assert _found(await _call(gateway, no_sku)) == [(pb.PROBLEM_CODE_MISSING_REQUIRED, "items[0].sku")]
        # A key the model names like the pattern is an unexpected key, never the binding's value.
        sneaky = {"items": [{"sku": "NOPE", "quantity": 1}], "items[*].sku": "SKU-1"}
        assert (pb.PROBLEM_CODE_OUT_OF_SET, "items[0].sku") in _found(await _call(gateway, sneaky))
    finally:
        await gateway.stop(0)


async def test_every_id_of_an_array_is_looked_up_in_one_round_trip(tmp_path, store) -> None:
    records, target = store
    gateway = await _gateway(tmp_path, target)
    try:
        items = [{"sku": "SKU-1", "quantity": 1}]
        ids = [f"ord_{n}" for n in range(50)]
        before = records.batches
        response = await _call(gateway, {"items": items, "related_orders": ids})
        assert response.decision == pb.DECISION_ALLOW, _found(response)
        assert records.batches == before + 1  # 50 ids, one LookupBatch
        response = await _call(gateway, {"items": items, "related_orders": ["ord_1", "ord_nope", "ord_B", 5]})
        assert _found(response) == [
            (pb.PROBLEM_CODE_WRONG_TYPE, "related_orders[3]"),
            (pb.PROBLEM_CODE_NOT_FOUND, "related_orders[1]"),
            (pb.PROBLEM_CODE_NOT_FOUND, "related_orders[2]"),  # another customer's: told as not found
        ]
    finally:
        await gateway.stop(0)


async def test_rules_read_a_many_id_record_binding_as_the_list_of_its_records(tmp_path, store) -> None:
    gateway = await _gateway(tmp_path, store[1])
    try:
        items = [{"sku": "SKU-1", "quantity": 1}]
        fine = await _call(gateway, {"items": items, "related_orders": ["ord_1", "ord_2", "ord_3"]})
        assert _found(fine) == []
        refunded = await _call(gateway, {"items": items, "related_orders": ["ord_1", "ord_R"]})
        assert _found(refunded) == [(pb.PROBLEM_CODE_RULE_FAILED, "related_orders")]
        many = await _call(gateway, {"items": items, "related_orders": [f"ord_{n}" for n in range(55)]})
        assert _found(many) == [(pb.PROBLEM_CODE_OUT_OF_RANGE, "related_orders")]
        assert (await _call(gateway, {"items": items, "related_orders": []})).decision == pb.DECISION_ALLOW
    finally:
        await gateway.stop(0)


async def test_an_owner_without_the_batch_call_is_asked_one_id_at_a_time(tmp_path) -> None:
    owner = NoBatch()
    server, target = await _records_server(owner)
    gateway = await _gateway(tmp_path, target)
    try:
        items = [{"sku": "SKU-1", "quantity": 1}]
        response = await _call(gateway, {"items": items, "related_orders": ["ord_1", "ord_2", "ord_B"]})
        assert _found(response) == [(pb.PROBLEM_CODE_NOT_FOUND, "related_orders[2]")]  # another customer's
        assert owner.store.lookups == 3
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_elements_past_the_limit_are_counted_as_not_checked_never_passed(tmp_path, store) -> None:
    gateway = await _gateway(tmp_path, store[1], limit=4)
    try:
        items = [{"sku": "SKU-1", "quantity": 1}] * 4 + [{"sku": "NOPE", "quantity": 1}] * 99_996
        response = await _call(gateway, {"items": items})
        assert _found(response) == []  # the invented ones sit past the limit: not checked, and said so
        assert [(s.argument, s.reason) for s in response.skipped] == [("items[*].sku", pb.SKIP_REASON_ELEMENTS_LIMIT)]
        labels = {"tool": "create_order", "argument": "items[*].sku"}
        assert value(gateway.registry, "argwatch_elements_unchecked_total", **labels) == 99_996
    finally:
        await gateway.stop(0)


async def test_repair_names_each_elements_path_and_lists_the_set_once(tmp_path, store) -> None:
    gateway = await _gateway(tmp_path, store[1])
    try:
        args = {"items": [{"sku": "NOPE", "quantity": 1}, {"sku": "ALSO-NOPE", "quantity": 1}]}
        channel, stub = gateway_stub(gateway)
        async with channel:
            response = await stub.Validate(
                pb.ValidateRequest(
                    tool="create_order",
                    call_id="c-1",
                    arguments_json=orjson.dumps(args),
                    session=pb.Session(customer_id="cus_A"),
                ),
                timeout=5,
            )
            repair = await stub.Repair(
                pb.RepairRequest(call_id=response.call_id, session=pb.Session(customer_id="cus_A")), timeout=5
            )
        assert '- items[0].sku: "NOPE" is not a valid value.' in repair.message
        assert '- items[1].sku: "ALSO-NOPE" is not a valid value.' in repair.message
        assert repair.message.count("SKU-1") == 1, repair.message  # the set's values once, not per element
        assert "listed above" in repair.message
    finally:
        await gateway.stop(0)
