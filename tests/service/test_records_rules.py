"""Records and rules over real gRPC: fabricated ids, another customer's order, a cents field, a source down."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import PolicyError, load_policy, parse_policy
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.sources import RecordStore
from argwatch.tui.status_view import window_of
from argwatch.v1 import admin_pb2, sources_pb2_grpc
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import loopback_settings
from tests.service.helpers import admin_status, admin_stub, gateway_stub, value

ORDERS = {
    ("order", "ord_1"): {"customer_id": "cus_A", "paid_cents": 4500},
    ("order", "ord_2"): {"customer_id": "cus_B", "paid_cents": 120},
}


def policy_yaml(record_target: str, failure: str, schema: str = "", reveal: bool = False) -> str:
    return f"""
sources:
  orders_db: {{grpc: {{target: "{record_target}", timeout: 300ms}}}}
  local: {{file: sets.yaml}}
value_sets: {{refunds.reason_codes: {{source: local}}}}
tools:
  refund_order:
    mode: reject
    {schema}
    arguments: {{reason_code: {{value_set: refunds.reason_codes}}}}
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, owner: customer_id,
               failure: {failure}, lookup_tool: search_orders, reveal_not_owned: {str(reveal).lower()}}}
    rules:
      - name: not_above_paid
        expr: args.amount_cents <= record.order.paid_cents
        message: >-
          amount_cents {{args.amount_cents}} is above the
          {{record.order.paid_cents}} cents paid for {{args.order_id}}
        argument: amount_cents
        code: out_of_range
        types: {{amount_cents: integer}}
"""


Start = Callable[..., Awaitable[RunningGateway]]


@pytest.fixture
async def start(tmp_path) -> AsyncIterator[Start]:
    store = RecordStore(ORDERS)
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(store, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    gateways: list[RunningGateway] = []

    async def begin(
        failure: str = "open", source_up: bool = True, schema: str = "", reveal: bool = False
    ) -> RunningGateway:
        if not source_up:
            await server.stop(0)
        (tmp_path / "sets.yaml").write_text("refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM]}\n")
        (tmp_path / "policy.yaml").write_text(policy_yaml(f"127.0.0.1:{port}", failure, schema, reveal))
        policy = load_policy(str(tmp_path / "policy.yaml"))
        gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
        gateways.append(gateway)
        return gateway

    yield begin
    for gateway in gateways:
        await gateway.stop(0)
    await server.stop(0)


async def call(gateway: RunningGateway, args: dict[str, object], customer: str = "cus_A") -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(
            pb.ValidateRequest(
                tool="refund_order", arguments_json=orjson.dumps(args), session=pb.Session(customer_id=customer)
            ),
            timeout=5,
        )
        return response


def found(response: pb.ValidateResponse) -> list[tuple[int, str]]:
    return [(p.code, p.argument) for p in response.problems]


async def test_a_call_that_passes_everything(start: Start) -> None:
    gateway = await start()
    response = await call(gateway, {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 4500})
    assert response.decision == pb.DECISION_ALLOW and found(response) == []


async def test_a_record_id_of_the_wrong_type_is_one_problem_not_one_per_check(start: Start) -> None:
    """The schema and the record check both judge order_id: one fault, one problem, counted once."""
    schema = "schema: {type: object, properties: {order_id: {type: string}}, required: [order_id]}"
    gateway = await start(schema=schema)
    wrong = await call(gateway, {"order_id": 42, "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert found(wrong) == [(pb.PROBLEM_CODE_WRONG_TYPE, "order_id")]
    missing = await call(gateway, {"reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert found(missing) == [(pb.PROBLEM_CODE_MISSING_REQUIRED, "order_id")]
    labels = {"tool": "refund_order", "argument": "order_id"}
    assert value(gateway.registry, "tool_argument_problems_total", **labels, code="wrong_type") == 1
    assert value(gateway.registry, "tool_argument_problems_total", **labels, code="missing_required") == 1


async def test_a_value_a_rule_reads_of_the_wrong_type_is_one_problem_not_one_per_check(start: Start) -> None:
    """The schema types amount_cents and the rule reads it: "120" is the schema's WRONG_TYPE, not also a rule
    that could not be evaluated (still counted as a rule error)."""
    schema = "schema: {type: object, properties: {amount_cents: {type: integer}, order_id: {type: string}}}"
    gateway = await start(schema=schema)
    wrong = await call(gateway, {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": "120"})
    assert found(wrong) == [(pb.PROBLEM_CODE_WRONG_TYPE, "amount_cents")]
    assert value(gateway.registry, "argwatch_rule_errors_total", tool="refund_order", rule="not_above_paid") == 1


async def test_a_bound_value_of_the_wrong_type_is_the_schemas_problem_and_repair_still_offers_the_set(
    start: Start,
) -> None:
    schema = "schema: {type: object, properties: {reason_code: {type: string}, order_id: {type: string}}}"
    gateway = await start(schema=schema)
    wrong = await call(gateway, {"order_id": "ord_1", "reason_code": 120, "amount_cents": 100})
    assert [(p.code, p.argument, p.value_set) for p in wrong.problems] == [
        (pb.PROBLEM_CODE_WRONG_TYPE, "reason_code", "refunds.reason_codes")
    ]
    channel, stub = gateway_stub(gateway)
    async with channel:
        repair = await stub.Repair(
            pb.RepairRequest(call_id=wrong.call_id, session=pb.Session(customer_id="cus_A")), timeout=5
        )
    assert [(legal.argument, list(legal.values)) for legal in repair.legal_values] == [
        ("reason_code", ["DAMAGED_ITEM"])
    ]


async def test_an_ownership_check_without_a_customer_in_the_session_never_passes(start: Start) -> None:
    """ "" once equalled the owner of a record that names none: a call without a session passed ownership."""
    gateway = await start()
    response = await call(gateway, {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100}, "")
    assert response.decision == pb.DECISION_REJECT
    assert found(response) == [(pb.PROBLEM_CODE_MISSING_SCOPE, "order_id")]
    channel, stub = gateway_stub(gateway)
    async with channel:
        repair = await stub.Repair(pb.RepairRequest(call_id=response.call_id), timeout=5)
    assert "no argument is at fault" in repair.message and "valid values" not in repair.message


def test_an_owner_attribute_that_names_no_one_belongs_to_no_one() -> None:
    from argwatch.server.records.checks import owned_by

    assert owned_by("cus_A", "cus_A") and owned_by(7, "7")
    assert not owned_by(None, "None") and not owned_by("", "") and not owned_by(True, "True")
    assert not owned_by({"id": "cus_A"}, "{'id': 'cus_A'}")


async def test_a_fabricated_id_is_not_found_and_the_model_is_told_how_to_find_one(start: Start) -> None:
    gateway = await start()
    response = await call(gateway, {"order_id": "ord_999", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert found(response) == [(pb.PROBLEM_CODE_NOT_FOUND, "order_id")]
    assert "look it up first with search_orders" in response.problems[0].message


async def test_a_real_order_of_another_customer_reads_to_the_caller_as_not_found_and_is_counted_not_owned(
    start: Start,
) -> None:
    gateway = await start()
    response = await call(gateway, {"order_id": "ord_2", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    invented = await call(gateway, {"order_id": "ord_999", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    # Another customer's order and one that does not exist read the same: the caller cannot probe which ids exist.
    assert found(response) == found(invented) == [(pb.PROBLEM_CODE_NOT_FOUND, "order_id")]
    assert response.problems[0].message == invented.problems[0].message.replace("ord_999", "ord_2")
    # Arguments named by records and rules are the policy's: labelled by name, not _unknown. The counts tell
    # the two apart.
    labels = {"tool": "refund_order", "argument": "order_id"}
    assert value(gateway.registry, "tool_argument_problems_total", **labels, code="not_owned") == 1
    assert value(gateway.registry, "tool_argument_problems_total", **labels, code="not_found") == 1


async def test_a_record_that_reveals_its_owner_says_not_owned(start: Start) -> None:
    gateway = await start(reveal=True)
    response = await call(gateway, {"order_id": "ord_2", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert found(response) == [(pb.PROBLEM_CODE_NOT_OWNED, "order_id")]
    assert "belongs to another customer" in response.problems[0].message


async def test_an_amount_above_what_was_paid_is_caught_by_a_rule_against_the_record(start: Start) -> None:
    gateway = await start()
    response = await call(
        gateway, {"order_id": "ord_2", "reason_code": "DAMAGED_ITEM", "amount_cents": 12000}, customer="cus_B"
    )
    assert found(response) == [(pb.PROBLEM_CODE_OUT_OF_RANGE, "amount_cents")]
    assert response.problems[0].message == "amount_cents: amount_cents 12000 is above the 120 cents paid for ord_2"


async def test_a_record_source_down_fails_open_where_the_policy_says_open(start: Start) -> None:
    gateway = await start(failure="open", source_up=False)
    response = await call(gateway, {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert response.decision == pb.DECISION_ALLOW and found(response) == []
    assert [(s.argument, s.value_set) for s in response.skipped] == [("order_id", "record.order")]
    assert (
        value(gateway.registry, "tool_argument_check_unavailable_total", tool="refund_order", set="record.order") == 1
    )


async def test_a_record_source_down_rejects_where_the_policy_says_closed(start: Start) -> None:
    gateway = await start(failure="closed", source_up=False)
    response = await call(gateway, {"order_id": "ord_1", "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
    assert response.decision == pb.DECISION_REJECT
    assert found(response) == [(pb.PROBLEM_CODE_CHECK_UNAVAILABLE, "order_id")]
    # The id was never checked: it is not an offending value, and ListSamples must not show it as one.
    channel, admin = admin_stub(gateway)
    async with channel:
        samples = await admin.ListSamples(admin_pb2.ListSamplesRequest(tool="refund_order", argument="order_id"))
    assert (samples.total, list(samples.values)) == (0, [])


async def test_ids_the_look_up_did_not_find_or_found_anothers_are_offenders_but_not_inventions(start: Start) -> None:
    gateway = await start()
    for order_id in ("ord_404", "ord_405", "ord_2"):  # two not found, one another customer's
        response = await call(gateway, {"order_id": order_id, "reason_code": "DAMAGED_ITEM", "amount_cents": 100})
        assert response.decision == pb.DECISION_REJECT
    await call(gateway, {"order_id": "ord_1", "reason_code": "GOODWILL", "amount_cents": 100})  # an invented code
    channel, admin = admin_stub(gateway)
    async with channel:
        ids = await admin.ListSamples(admin_pb2.ListSamplesRequest(tool="refund_order", argument="order_id"))
        codes = await admin.ListSamples(admin_pb2.ListSamplesRequest(tool="refund_order", argument="reason_code"))
    assert (ids.total, ids.out_of_set, ids.invented) == (3, 0, 0)
    assert (codes.total, codes.out_of_set, codes.invented) == (1, 1, 1)


def test_a_bad_rule_is_a_load_error_with_its_location() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(
            b"""
sources: {db: {grpc: {target: "127.0.0.1:1"}}}
tools:
  t:
    records: {order: {source: db, kind: order, id_argument: order_id}}
    rules:
      - {expr: "args.amount <= ", argument: amount}
      - {expr: "record.invoice.total > 0"}
""",
            "/p.yaml",
        )
    messages = [f"{issue.path}: {issue.message}" for issue in raised.value.issues]
    assert messages[0].startswith("tools.t.rules[0].expr: not a valid CEL expression:")
    assert "1:16" in messages[0]  # CEL's own line:column
    assert messages[1] == "tools.t.rules[1].expr: refers to record.invoice, which this tool's records do not define"


async def test_a_record_check_can_run_again_the_moment_its_source_answers(tmp_path) -> None:
    """Status says whether each check can run now: the window's counts of checks that could not run last a
    minute after a recovery, and the TUI's FAIL-CLOSED must not."""

    async def serve(port: int = 0) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        sources_pb2_grpc.add_RecordSourceServicer_to_server(RecordStore(ORDERS), server)
        bound = server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        return server, bound

    def can_run(status: admin_pb2.GetStatusResponse) -> dict[str, bool]:
        (tool,) = [t for t in status.tools if t.tool == "refund_order"]
        return {check.check: check.available_now for check in tool.checks}

    server, port = await serve()
    (tmp_path / "sets.yaml").write_text("refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM]}\n")
    (tmp_path / "policy.yaml").write_text(policy_yaml(f"127.0.0.1:{port}", "closed"))
    policy = load_policy(str(tmp_path / "policy.yaml"))
    gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    try:
        args = {"reason_code": "DAMAGED_ITEM", "amount_cents": 100}
        assert (await call(gateway, {"order_id": "ord_1", **args})).decision == pb.DECISION_ALLOW
        assert can_run(await admin_status(gateway)) == {
            "set:refunds.reason_codes": True,
            "record:order": True,
            "rule:not_above_paid": True,
        }
        await server.stop(0)
        down = await call(gateway, {"order_id": "ord_2", **args}, customer="cus_B")  # not cached: asked
        assert found(down) == [(pb.PROBLEM_CODE_CHECK_UNAVAILABLE, "order_id")]
        stopped = can_run(await admin_status(gateway))
        assert (stopped["record:order"], stopped["rule:not_above_paid"]) == (False, False)  # the rule reads it
        server, _ = await serve(port)
        deadline = time.monotonic() + 10
        for attempt in range(1000):  # fresh ids, never cached, until one is looked up again
            answer = await call(gateway, {"order_id": f"ord_new_{attempt}", **args})
            if found(answer) != [(pb.PROBLEM_CODE_CHECK_UNAVAILABLE, "order_id")] or time.monotonic() > deadline:
                break
        status = await admin_status(gateway)
        assert can_run(status)["record:order"] is True
        (order_id,) = [a for a in status.arguments if a.argument == "order_id"]
        assert window_of(order_id, 60).problems["check_unavailable"] >= 1  # the window still counts them
    finally:
        await gateway.stop(0)
        await server.stop(0)
