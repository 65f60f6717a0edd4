"""The repair loop, measured: succeeded after attempts, abandoned when nothing passes in time, give-up on repeats."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from argwatch.server.process.app import build_gateway
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import gateway_stub, request, value


async def test_succeeded_abandoned_and_give_up_are_counted(tmp_path, source: SourceServer) -> None:
    now = [time.time()]
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    gateway = await build_gateway(
        loopback_settings(policy.path), policy=policy, registry=CollectorRegistry(), clock=lambda: now[0]
    )
    registry = gateway.registry
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:

            async def call(code: str, conversation: str) -> pb.ValidateResponse:
                response: pb.ValidateResponse = await stub.Validate(
                    request("refund_order", {"reason_code": code}, conversation=conversation), timeout=5
                )
                return response

            # conversation a: two rejected attempts, then a call that passes.
            first, second = await call("OTHER", "a"), await call("DAMAGED", "a")
            assert [(r.decision, r.repair_attempt, r.give_up) for r in (first, second)] == [
                (pb.DECISION_REJECT, 1, False),
                (pb.DECISION_REJECT, 2, False),
            ]
            assert (await call("DAMAGED_ITEM", "a")).decision == pb.DECISION_ALLOW
            # conversation b: rejected, never repaired.
            await call("OTHER", "b")
            # conversation c: the same invalid call twice: give up.
            await call("NOPE", "c")
            repeated = await call("NOPE", "c")
            assert (repeated.decision, repeated.give_up) == (pb.DECISION_REJECT, True)

        assert value(registry, "tool_argument_repair_succeeded_total", tool="refund_order") == 1
        assert value(registry, "tool_argument_repair_attempts_sum", tool="refund_order") == 2
        assert value(registry, "tool_argument_repair_abandoned_total", tool="refund_order") == 0
        now[0] += policy.repair.remember_seconds + 1  # the window passes
        await gateway.repairs.sweep()
        assert value(registry, "tool_argument_repair_abandoned_total", tool="refund_order") == 2  # b and c
    finally:
        await gateway.stop(0)
