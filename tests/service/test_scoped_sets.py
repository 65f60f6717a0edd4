"""A set scoped per customer, published with argwatch.sources to a real gateway: each customer is judged, and
repaired, against its own members only; another customer's member reads as invented; operators tell them apart."""

from __future__ import annotations

from pathlib import Path

import orjson

from argwatch.server.process.app import RunningGateway
from argwatch.sources import ValueSetCatalog
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on, start_source
from tests.service.helpers import admin_stub, eventually, gateway_stub, value

POLICY = """
sources:
  billing: {{grpc: {{target: "127.0.0.1:{port}", timeout: 1s}}}}
value_sets:
  billing.payment_methods: {{source: billing, ttl: 5m, scope: customer_id}}
tools:
  pay_invoice:
    mode: reject
    arguments:
      payment_method_id: {{value_set: billing.payment_methods{reveal}}}
"""
SET = "billing.payment_methods"
LABELS = {"tool": "pay_invoice", "argument": "payment_method_id"}


async def validate(running: RunningGateway, method: object, customer: str, call_id: str) -> pb.ValidateResponse:
    channel, stub = gateway_stub(running)
    async with channel:
        response: pb.ValidateResponse = await stub.Validate(
            pb.ValidateRequest(
                tool="pay_invoice",
                call_id=call_id,
                conversation_id=f"conv-{call_id}",
                arguments_json=orjson.dumps({"payment_method_id": method}),
                session=pb.Session(customer_id=customer),
            ),
            timeout=5,
        )
        return response


async def repair(running: RunningGateway, call_id: str, customer: str) -> pb.RepairResponse:
    channel, stub = gateway_stub(running)
    async with channel:
        response: pb.RepairResponse = await stub.Repair(
            pb.RepairRequest(
                call_id=call_id, conversation_id=f"conv-{call_id}", session=pb.Session(customer_id=customer)
            ),
            timeout=5,
        )
        return response


async def started(tmp_path: Path, catalog: ValueSetCatalog, reveal: str = "") -> tuple[RunningGateway, object]:
    owner = await start_source(catalog)
    running = await gateway_on(tmp_path, POLICY.format(port=owner.port, reveal=reveal))
    return running, owner


async def test_a_customer_is_judged_and_repaired_against_its_own_members_only(tmp_path: Path) -> None:
    catalog = ValueSetCatalog()
    catalog.publish(
        SET,
        members_by_scope={
            "cus_a": ["pm_visa_4242", "pm_sepa_0001"],
            "cus_b": ["pm_amex_0005", "pm_visa_9999", "pm_sepa_7777"],
        },
    )
    running, owner = await started(tmp_path, catalog)
    try:
        assert (await validate(running, "pm_visa_4242", "cus_a", "c1")).decision == pb.DECISION_ALLOW
        assert (await validate(running, "pm_amex_0005", "cus_b", "c2")).decision == pb.DECISION_ALLOW

        theirs = await validate(running, "pm_amex_0005", "cus_a", "c3")  # customer B's member
        invented = await validate(running, "pm_amex_0006", "cus_a", "c4")  # nobody's
        assert theirs.decision == invented.decision == pb.DECISION_REJECT
        (told,), (made_up,) = theirs.problems, invented.problems
        # Towards the model the two read the same: same code, same shape, same words.
        assert (
            (told.code, told.shape) == (made_up.code, made_up.shape) == (pb.PROBLEM_CODE_OUT_OF_SET, pb.SHAPE_INVENTED)
        )
        assert told.message == made_up.message.replace("0006", "0005")

        advice, invented_advice = await repair(running, "c3", "cus_a"), await repair(running, "c4", "cus_a")
        assert advice.message == invented_advice.message.replace("0006", "0005")
        (legal,) = advice.legal_values
        assert (sorted(legal.values), legal.total) == (["pm_sepa_0001", "pm_visa_4242"], 2)
        assert "cus_b" not in advice.message and "pm_visa_9999" not in advice.message

        # Operators tell them apart: the shape counter, and the Admin API's offending values.
        assert value(running.registry, "tool_argument_mismatch_shape_total", **LABELS, shape="other_scope") == 1
        assert value(running.registry, "tool_argument_mismatch_shape_total", **LABELS, shape="invented") == 1
        channel, admin = admin_stub(running)
        async with channel:
            samples = await admin.ListSamples(
                admin_pb2.ListSamplesRequest(tool="pay_invoice", argument="payment_method_id")
            )
        assert {(sample.value, sample.shape) for sample in samples.values} == {
            ('"pm_amex_0005"', "other_scope"),
            ('"pm_amex_0006"', "invented"),
        }
    finally:
        await running.stop(0)
        await owner.stop()  # type: ignore[attr-defined]


async def test_a_scope_published_while_watched_reaches_only_that_customer(tmp_path: Path) -> None:
    catalog = ValueSetCatalog()
    catalog.publish_scope(SET, "cus_a", ["pm_visa_4242"])
    running, owner = await started(tmp_path, catalog)
    try:
        catalog.publish_scope(SET, "cus_a", ["pm_visa_5555"], replaced_by={"pm_visa_4242": "pm_visa_5555"})
        catalog.publish_scope(SET, "cus_b", ["pm_visa_4242"])  # the same value, another customer's now

        async def arrived() -> bool:
            return (await validate(running, "pm_visa_4242", "cus_b", "w1")).decision == pb.DECISION_ALLOW

        await eventually(arrived)
        (retired,) = (await validate(running, "pm_visa_4242", "cus_a", "w2")).problems
        assert (retired.shape, retired.suggestion) == (pb.SHAPE_RETIRED, "pm_visa_5555")
        (theirs,) = (await validate(running, "pm_visa_5555", "cus_b", "w3")).problems
        assert theirs.shape == pb.SHAPE_INVENTED
    finally:
        await running.stop(0)
        await owner.stop()  # type: ignore[attr-defined]


async def test_a_call_naming_no_customer_is_refused_never_judged_against_every_customer(tmp_path: Path) -> None:
    catalog = ValueSetCatalog()
    catalog.publish(SET, members_by_scope={"cus_a": ["pm_visa_4242"]})
    running, owner = await started(tmp_path, catalog)
    try:
        response = await validate(running, "pm_visa_4242", "", "n1")
        assert response.decision == pb.DECISION_REJECT
        assert [(p.code, p.argument) for p in response.problems] == [
            (pb.PROBLEM_CODE_MISSING_SCOPE, "payment_method_id")
        ]
        assert value(running.registry, "tool_argument_problems_total", **LABELS, code="missing_scope") == 1
        assert not (await repair(running, "n1", "")).legal_values  # no scope: nothing is listed
    finally:
        await running.stop(0)
        await owner.stop()  # type: ignore[attr-defined]


async def test_the_policy_may_tell_the_model_that_a_value_is_another_customers(tmp_path: Path) -> None:
    catalog = ValueSetCatalog()
    catalog.publish(SET, members_by_scope={"cus_a": ["pm_visa_4242"], "cus_b": ["pm_amex_0005"]})
    running, owner = await started(tmp_path, catalog, reveal=", reveal_other_scopes: true")
    try:
        (problem,) = (await validate(running, "pm_amex_0005", "cus_a", "r1")).problems
        assert problem.shape == pb.SHAPE_OTHER_SCOPE
        assert "it is another customer's" in problem.message
    finally:
        await running.stop(0)
        await owner.stop()  # type: ignore[attr-defined]
