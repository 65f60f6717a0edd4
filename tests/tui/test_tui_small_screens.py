"""On-call's small terminals, against a real gateway: at 80x24 and 120x40 nothing that says what to do is cut."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.detail_screen import DetailScreen
from argwatch.tui.help_screen import HelpScreen
from tests.conftest import GatewayFactory, SourceServer
from tests.service.helpers import gateway_stub, request
from tests.tui.pilot_helpers import screen_lines
from tests.tui.pilot_helpers import until_on_screen as until

CODES = ["GOODWILL", "BECAUSE", "NICE_TRY"] * 4 + ["DAMAGED_ITEM"] * 18  # 12 of 30 invented: OOS>3% too


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_source_down_shows_and_the_detail_figures_stay_whole(
    size: tuple[int, int], gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(CODES):
            await stub.Validate(request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5)
    await source.stop()
    client = AdminClient(Connection(gateway.admin_target, actor="pilot@oncall"))
    app = ArgwatchApp(client, interval=0.2)
    try:
        async with app.run_test(size=size) as pilot:

            def row(argument: str) -> str:
                return next((line for line in screen_lines(app) if f" {argument} " in line), "")

            # The flag that says what to do is never counted away behind "+N more", however narrow.
            await until(pilot, lambda: row("reason_code").split("  ")[-1].startswith("SRC-DOWN"))
            assert "refusing 40%" in row("reason_code")  # 12 of 30 calls refused in the last minute
            await until(pilot, lambda: "q quit" in screen_lines(app)[-1])
            footer = screen_lines(app)[-1]
            assert "? help" in footer and "q quit" in footer  # at any width
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen) and "checks" in str(screen_lines(app)))
            lines = screen_lines(app)
            assert not any("…" in line for line in lines), lines  # stacked or wrapped, never cut
            (checks,) = [line.split() for line in lines if line.strip().startswith("checks ")]
            assert checks == ["checks", "30", "30", "30"]  # each window's figure whole
            (rejected,) = [line.split() for line in lines if line.strip().startswith("rejected %")]
            assert rejected == ["rejected", "%", "40.0", "40.0", "40.0"]
            assert "? help" in lines[-1] and "q quit" in lines[-1]
    finally:
        await client.close()


async def test_question_mark_on_a_flagged_row_says_what_to_do_in_the_runbooks_words(
    gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(CODES):
            await stub.Validate(request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5)
    await source.stop()
    client = AdminClient(Connection(gateway.admin_target, actor="pilot@oncall"))
    app = ArgwatchApp(client, interval=0.2)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: any("SRC-DOWN STALE" in line for line in screen_lines(app)))
            while (row := app.selected_row()) is None or row.argument != "reason_code":
                await pilot.press("down")
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen))
            said = str(app.screen.query_one("#what-to-do", Static).render())
            assert "What to do about refund_order . reason_code" in said
            assert "SRC-DOWN: the set's source is unreachable from this replica" in said
            assert "what to do: Check the owning service's health and the network path from the gateway." in said
            assert "refusing 100%: the share of the tool's calls refused now" in said  # it refuses
            assert said.index("SRC-DOWN:") < said.index("STALE:") < said.index("OOS>3%:")  # what to act on first
    finally:
        await client.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_flip_dialog_with_its_preview_fits_whole(
    size: tuple[int, int], gateway_factory: GatewayFactory, source: SourceServer
) -> None:
    """Title, fields, the gateway's preview (scrolling within its share if long) and both buttons, none cut."""
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(CODES):
            await stub.Validate(request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5)
    client = AdminClient(Connection(gateway.admin_target, actor="pilot@oncall"))
    app = ArgwatchApp(client, interval=0.2)
    try:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.status is not None)
            await pilot.press("m")
            first = "change: refund_order, the whole tool: reject -> observe"
            await until(pilot, lambda: any(line.strip("█ ").startswith(first) for line in screen_lines(app)))
            shown = screen_lines(app)
            assert any("Change the mode of tool refund_order" in line for line in shown)
            assert any("Cancel" in line and "Apply" in line for line in shown)
            assert any(line.strip().startswith("█▄▄") for line in shown)  # its bottom edge: nothing below it cut
    finally:
        await client.close()
