"""The detail view puts each model's out-of-set rate side by side, where the policy declares models (issue 21)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.detail_screen import DetailScreen
from tests.conftest import gateway_on, write_sets_file
from tests.service.test_rates_by_model import POLICY, calls_of, send
from tests.tui.pilot_helpers import until


def plain(widget: Static) -> str:
    """What a Static shows, as text (a Rich table renders only through a console)."""
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_the_detail_shows_each_declared_model_beside_the_others(tmp_path: Path) -> None:
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, POLICY)
    client = AdminClient(Connection(gateway.admin_target, actor="pilot@oncall"))
    try:
        await send(gateway, calls_of("gpt-4.1-mini", "support-v13", 100, 10))
        await send(gateway, calls_of("claude-sonnet-4-5", "support-v13", 100, 30))
        await send(gateway, calls_of("some-new-model", "support-v13", 10, 5))
        app = ArgwatchApp(client, interval=0.2)
        async with app.run_test(size=(160, 50)) as pilot:
            await until(pilot, lambda: app.status is not None)
            while (row := app.selected_row()) is None or row.argument != "warehouse_code":
                await pilot.press("down")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen))
            by_model = app.screen.query_one("#by-model", Static)
            await until(pilot, lambda: "gpt-4.1-mini" in plain(by_model))
            lines = [line.split() for line in plain(by_model).splitlines()]
            rows = {(line[0], line[1]): line[2:4] for line in lines[1:]}
            assert rows == {
                ("_other", "support-v13"): ["50.0", "(10)"],
                ("claude-sonnet-4-5", "support-v13"): ["30.0", "(100)"],
                ("gpt-4.1-mini", "support-v13"): ["10.0", "(100)"],
            }
    finally:
        await client.close()
        await gateway.stop(0)
