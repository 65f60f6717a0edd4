"""The shadow screen (`d`): against a real gateway with a shadow set, with Pilot; and as a snapshot on recorded data."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.shadow_screen import ShadowScreen
from argwatch.tui.status_view import summary
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request
from tests.service.test_shadow_policy import LIVE, SETS, SHADOW
from tests.tui.pilot_helpers import until
from tests.tui.recorded_admin import RecordedAdmin
from tests.tui.test_tui_snapshots import SnapCompare, settled, shown


def cells(screen: ShadowScreen) -> list[tuple[str, ...]]:
    table = screen.query_one(DataTable)
    return [tuple(str(cell) for cell in table.get_row_at(index)) for index in range(table.row_count)]


def text_of(screen: ShadowScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_d_opens_the_shadow_s_differences_and_escape_goes_back(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "shadow.yaml").write_text(SHADOW)
    gateway = await gateway_on(tmp_path, LIVE, shadow_policy=str(tmp_path / "shadow.yaml"))
    client = AdminClient(Connection(gateway.admin_target))
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
            await stub.Validate(request("refund_order", {"reason_code": "C"}, call_id="r1"), timeout=5)
        assert gateway.shadow is not None
        await eventually(lambda: gateway.shadow is not None and gateway.shadow.runner.calls_judged() == 2)
        version = gateway.shadow.runner.judge.policy.version if gateway.shadow.runner.judge else ""
        app = ArgwatchApp(client, interval=0.2)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: app.status is not None)
            await until(pilot, lambda: app.status is not None and app.status.shadow_differences == 2)
            assert app.status is not None and f"shadow {version[:12]}: 2 calls differ (d)" in summary(app.status)
            await pilot.press("d")
            await until(
                pilot, lambda: isinstance(app.screen, ShadowScreen) and app.screen.query_one(DataTable).row_count > 0
            )
            screen = app.screen
            assert isinstance(screen, ShadowScreen)
            assert cells(screen) == [
                ("add_note", "would_refuse", "1", "n1", "allow", "reject", 'out_of_set@country="XX"'),
                (
                    "refund_order",
                    "would_allow",
                    "1",
                    "r1",
                    "reject",
                    "allow",
                    "no problems · live: out_of_set@reason_code",
                ),
            ]
            assert text_of(screen, "#shadow-title") == (
                f"Shadow policy {version} ({tmp_path / 'shadow.yaml'}): 2 calls judged, 0 not judged (busy), 0 raised"
            )
            assert "tools changed: refund_order, add_note, ship" in text_of(screen, "#shadow-promote")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ShadowScreen))
    finally:
        await client.close()
        await gateway.stop(0)


def test_shadow_screen(snap_compare: SnapCompare) -> None:
    async def open_shadow(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("d")
        await settled(
            pilot,
            lambda: isinstance(pilot.app.screen, ShadowScreen) and pilot.app.screen.query_one(DataTable).row_count == 4,
        )

    app = ArgwatchApp(RecordedAdmin(), interval=1.0, clock=lambda: 1000.0, live_detail=False)
    assert snap_compare(app, terminal_size=(140, 32), run_before=open_shadow)
