"""At thousands of tools the TUI asks for the ones most in need, finds the rest by its filter, and says so."""

from __future__ import annotations

from argwatch.tui.app import TOOLS_SHOWN, ArgwatchApp
from argwatch.v1 import admin_pb2
from tests.tui.pilot_helpers import banner, until
from tests.tui.recorded_admin import RecordedAdmin, recorded_status


async def test_the_tui_asks_for_the_tools_most_in_need_and_sends_its_filter() -> None:
    admin = RecordedAdmin()
    app = ArgwatchApp(admin, interval=1.0, clock=lambda: 1000.0, live_detail=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: app.status is not None)
        first = admin.selections[0]
        assert first is not None
        assert (first.order, first.max_tools, first.contains) == (admin_pb2.TOOL_ORDER_ATTENTION, TOOLS_SHOWN, "")
        await pilot.press("slash", *"Refund")
        await until(pilot, lambda: len(admin.selections) >= 2)
        asked = admin.selections[-1]
        assert asked is not None and asked.contains == "refund"  # the gateway matches without case
        assert "most in need first" not in banner(app)  # every tool is here: no count of the others


async def test_the_banner_says_when_not_every_tool_is_shown() -> None:
    admin = RecordedAdmin()

    def many() -> admin_pb2.GetStatusResponse:
        status = recorded_status()
        status.tools_total = status.tools_matched = 10_001
        return status

    admin._status = many
    app = ArgwatchApp(admin, interval=1.0, clock=lambda: 1000.0, live_detail=False)
    async with app.run_test(size=(200, 30)) as pilot:
        await until(pilot, lambda: app.status is not None)
        await until(pilot, lambda: "of 10,001 tools" in banner(app))
        shown = len(app.status.tools) if app.status is not None else 0
        assert f"{shown:,} of 10,001 tools, most in need first (/ finds others)" in banner(app)
