"""The coverage screen (`c`): against a real gateway with Pilot, and as a snapshot on recorded data."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.coverage_screen import CoverageScreen
from tests.conftest import gateway_on, write_sets_file
from tests.service.helpers import gateway_stub, request
from tests.tui.pilot_helpers import until
from tests.tui.recorded_admin import RecordedAdmin
from tests.tui.test_tui_snapshots import SnapCompare, settled, shown

POLICY = """
sources:
  local: {file: sets.yaml}
value_sets:
  wms.warehouses: {source: local}
tools:
  transfer_stock:
    schema:
      type: object
      properties:
        warehouse_code: {type: string}
        priority: {type: string, pattern: "^P[0-4]$"}
        note: {}
    arguments:
      warehouse_code: {value_set: wms.warehouses}
  ping: {schema: {type: object, additionalProperties: false}}
sampling: {rate: 1.0}
"""


def cells(screen: CoverageScreen) -> list[tuple[str, ...]]:
    table = screen.query_one(DataTable)
    return [tuple(str(cell) for cell in table.get_row_at(index)) for index in range(table.row_count)]


def text_of(screen: CoverageScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_c_opens_the_coverage_of_the_gateways_policy_and_escape_goes_back(tmp_path: Path) -> None:
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, POLICY)
    client = AdminClient(Connection(gateway.admin_target))
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:  # priority's pattern refuses two words, written again and again
            for index in range(10):
                arguments = {"warehouse_code": "AMS-1", "priority": "high" if index % 2 else "low"}
                await stub.Validate(request("transfer_stock", arguments), timeout=5)
        app = ArgwatchApp(client, interval=0.2)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: app.status is not None)
            await pilot.press("c")
            await until(
                pilot, lambda: isinstance(app.screen, CoverageScreen) and app.screen.query_one(DataTable).row_count > 0
            )
            screen = app.screen
            assert isinstance(screen, CoverageScreen)
            assert cells(screen) == [
                ("transfer_stock", "2/3", "warehouse_code", "enumerated", "type:string, value_set:wms.warehouses"),
                ("", "", "priority", "checked", "type:string, pattern"),
                ("", "", "note", "unconstrained", "-"),
                (
                    "",
                    "",
                    "(others)",
                    "unchecked",
                    "additionalProperties is not false: arguments it does not name pass unchecked",
                ),
                ("ping", "0/0", "-", "", "takes no argument"),
            ]
            title = text_of(screen, "#coverage-title")
            assert title == (
                f"Argument coverage of policy {gateway.policy.version}: 2 of 3 covered (66.7%): "
                "1 enumerated, 1 checked, 0 typed only, 1 unconstrained"
            )
            assert text_of(screen, "#coverage-suggestions").splitlines() == [
                "Suggested bindings: 1",
                '  transfer_stock.priority (value_set): 10 values sampled, 2 distinct ("high", "low"): '
                "the model writes it from a small vocabulary",
            ]
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, CoverageScreen))
    finally:
        await client.close()
        await gateway.stop(0)


def test_coverage_screen(snap_compare: SnapCompare) -> None:
    async def open_coverage(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("c")
        await settled(
            pilot,
            lambda: (
                isinstance(pilot.app.screen, CoverageScreen) and pilot.app.screen.query_one(DataTable).row_count == 14
            ),
        )

    app = ArgwatchApp(RecordedAdmin(), interval=1.0, clock=lambda: 1000.0, live_detail=False)
    assert snap_compare(app, terminal_size=(140, 32), run_before=open_coverage)
