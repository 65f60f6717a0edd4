"""argwatch.sources: a value retired with `replaced_by` reaches a real gateway, whose repair names the replacement."""

from __future__ import annotations

from pathlib import Path

from argwatch.client import Gateway, Session, from_openai
from argwatch.sources import ValueSetCatalog
from tests.conftest import gateway_on, start_source
from tests.service.helpers import eventually

POLICY = """
sources:
  refunds: {{grpc: {{target: "127.0.0.1:{port}", timeout: 1s}}}}
value_sets:
  refunds.reason_codes: {{source: refunds, ttl: 5m}}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {{value_set: refunds.reason_codes}}
"""


def refund(reason_code: str) -> dict[str, object]:
    arguments = f'{{"reason_code": "{reason_code}"}}'
    return {"id": "call_1", "type": "function", "function": {"name": "refund_order", "arguments": arguments}}


async def test_a_value_retired_while_watched_is_repaired_to_its_replacement(tmp_path: Path) -> None:
    """Removed with replaced_by in a later publish: the gateway gets it in the delta, and both the problem
    (RETIRED, with the replacement as its suggestion) and the Repair message name the replacement."""
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "CUSTOMER_UNHAPPY"])
    owner = await start_source(catalog)
    running = await gateway_on(tmp_path, POLICY.format(port=owner.port))
    try:
        published = catalog.publish(
            "refunds.reason_codes", ["DAMAGED_ITEM", "OTHER"], replaced_by={"CUSTOMER_UNHAPPY": "OTHER"}
        )
        assert published.retired == {"CUSTOMER_UNHAPPY"} and dict(published.replaced_by) == {
            "CUSTOMER_UNHAPPY": "OTHER"
        }
        async with Gateway(running.target) as gateway:

            async def retired() -> bool:
                outcome = await gateway.check(from_openai(refund("CUSTOMER_UNHAPPY")), Session("conv-1"))
                return [problem.shape for problem in outcome.problems] == ["RETIRED"]

            await eventually(retired)
            outcome = await gateway.check(from_openai(refund("CUSTOMER_UNHAPPY")), Session("conv-2"))
        assert not outcome.go_ahead
        (problem,) = outcome.problems
        assert (problem.code, problem.shape, problem.suggestion) == ("OUT_OF_SET", "RETIRED", "OTHER")
        assert 'replaced by "OTHER"' in outcome.tool_error
    finally:
        await running.stop(0)
        await owner.stop()


async def test_a_replacement_published_before_the_gateway_came_arrives_in_the_snapshot(tmp_path: Path) -> None:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "OTHER"], replaced_by={"CUSTOMER_UNHAPPY": "OTHER"})
    owner = await start_source(catalog)
    running = await gateway_on(tmp_path, POLICY.format(port=owner.port))
    try:
        async with Gateway(running.target) as gateway:
            outcome = await gateway.check(from_openai(refund("CUSTOMER_UNHAPPY")), Session("conv-1"))
        assert [(p.shape, p.suggestion) for p in outcome.problems] == [("RETIRED", "OTHER")]
        assert 'replaced by "OTHER"' in outcome.tool_error
    finally:
        await running.stop(0)
        await owner.stop()
