"""Issue 18.1: an owning service that restarts counts its versions from 1 again, and the gateway follows it.

Before, the gateway refused every snapshot of the new process as `version_order`
("keeping the last good copy"): the set stayed stale for minutes, a tool with
on_stale: observe was quietly downgraded, and new members were refused. Each
ValueSetCatalog is now an incarnation of its owner, and versions are compared
only within one.
"""

from __future__ import annotations

import time
from pathlib import Path

from argwatch.sources import ValueSetCatalog
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on, start_source
from tests.service.helpers import eventually, gateway_stub, request, value

POLICY = """
sources:
  refunds: {{grpc: {{target: "127.0.0.1:{port}", timeout: 1s}}}}
value_sets:
  refunds.reason_codes: {{source: refunds, ttl: 5m, max_staleness: 1h, on_stale: observe}}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {{value_set: refunds.reason_codes}}
"""


async def test_a_restarted_owner_is_followed_within_two_seconds_and_nothing_is_refused(tmp_path: Path) -> None:
    before = ValueSetCatalog()
    for version in range(5):  # the old process got to version 5
        before.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WRONG_ITEM", f"OLD_{version}"])
    owner = await start_source(before)
    # The default reconnect schedule: a source that was serving is retried at most 0.5 s apart for a minute.
    gateway = await gateway_on(tmp_path, POLICY.format(port=owner.port))
    channel, stub = gateway_stub(gateway)
    try:
        held = gateway.provider.read("refunds.reason_codes")
        assert held is not None and held.snapshot.version == 5
        await owner.stop()  # as kill -9: the stream breaks
        after = ValueSetCatalog()  # the new process: versions from 1, with a code added meanwhile
        after.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WRONG_ITEM", "ITEM_NOT_AS_DESCRIBED"])
        restarted = await start_source(after, port=owner.port)
        serving = time.monotonic()
        try:

            async def follows() -> bool:
                verdict = await stub.Validate(
                    request("refund_order", {"reason_code": "ITEM_NOT_AS_DESCRIBED"}), timeout=2
                )
                return verdict.decision == pb.DECISION_ALLOW and not verdict.problems

            await eventually(follows, seconds=10)
            assert time.monotonic() - serving < 2.0
            reading = gateway.provider.read("refunds.reason_codes")
            assert reading is not None and not reading.stale and reading.snapshot.version == 1
            verdict = await stub.Validate(request("refund_order", {"reason_code": "OLD_4"}), timeout=2)
            assert verdict.decision == pb.DECISION_REJECT  # enforced, not downgraded: the new set is checked
            refused = value(
                gateway.registry, "argwatch_value_set_update_rejected_total", set="refunds.reason_codes",
                reason="version_order",
            )  # fmt: skip
            assert refused == 0
        finally:
            await restarted.stop()
    finally:
        await channel.close()
        await gateway.stop(0)
