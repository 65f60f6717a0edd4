"""One glance against a real gateway and a real record owner: the source down is named above the table with
its address and error; a fail-closed look-up refuses in reject and reads CLOSED·OBSERVED once the tool is
observed, with MODE no longer saying it refuses; the owner back clears both."""

from __future__ import annotations

import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.v1 import gateway_pb2 as pb
from tests.service.helpers import eventually
from tests.service.test_records_rules import call
from tests.service.test_source_status import REFUND, Owner, owner_and_gateway  # noqa: F401  (a fixture)
from tests.tui.pilot_helpers import screen_lines
from tests.tui.pilot_helpers import until_on_screen as until


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_record_owner_down_then_the_tool_observed_then_the_owner_back(
    size: tuple[int, int],
    owner_and_gateway: tuple[Owner, RunningGateway],  # noqa: F811  (the fixture, imported above)
) -> None:
    owner, gateway = owner_and_gateway
    await owner.stop()
    for index in range(6):  # each a new id: none cached, every look-up goes to the owner that is down
        refused = await call(gateway, {**REFUND, "order_id": f"ord_x{index}"})
        assert refused.decision == pb.DECISION_REJECT
    client = AdminClient(Connection(gateway.admin_target, actor="pilot@oncall"))
    app = ArgwatchApp(client, interval=0.2)
    try:
        async with app.run_test(size=size) as pilot:

            def screen() -> str:
                return " ".join(" ".join(screen_lines(app)).split())  # the source line wraps at 80 columns

            def row(argument: str) -> str:
                return next((line for line in screen_lines(app) if f" {argument} " in line), "")

            await until(pilot, lambda: f"SOURCE DOWN orders_db 127.0.0.1:{owner.port}: UNAVAILABLE:" in screen())
            assert "Connection refused · records order · tools refund_order" in screen()
            await until(pilot, lambda: "FAIL-CLOSED 6" in row("order_id"))
            assert "refusing 100%" in row("order_id")

            await client.set_mode("refund_order", pb.MODE_OBSERVE, "INC-9: orders db down", 900)
            passed = await call(gateway, {**REFUND, "order_id": "ord_y"})
            assert passed.decision == pb.DECISION_ALLOW  # observed: the look-up cannot run, the call passes
            await until(pilot, lambda: "CLOSED·OBS" in row("order_id"))  # "CLOSED·OBSERVED 7" where it fits
            assert "FAIL-CLOSED" not in row("order_id") and "refusing" not in row("order_id")

            await owner.start()  # the same port: the gateway's channel reconnects by itself

            async def back() -> bool:
                await call(gateway, REFUND)  # a look-up answered: the source line and the flag go at once
                return "SOURCE DOWN" not in screen() and "CLOSED" not in row("order_id")

            await eventually(back, 15)
    finally:
        await client.close()
