"""Snapshot tests of the TUI's screens on fixed data and a stopped clock (update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from argwatch.tui.app import ArgwatchApp
from tests.tui.recorded_admin import RecordedAdmin

SIZE = (200, 32)
SnapCompare = Callable[..., bool]


def recorded_app() -> ArgwatchApp:
    return ArgwatchApp(RecordedAdmin(), interval=1.0, clock=lambda: 1000.0, live_detail=False)


async def shown(pilot: Pilot[None]) -> None:
    """Waits until the recorded snapshot is in the table."""
    app = pilot.app
    assert isinstance(app, ArgwatchApp)
    for _ in range(100):
        if app.status is not None:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_main_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=shown)


def test_detail_view(snap_compare: SnapCompare) -> None:
    async def open_detail(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("enter")
        await pilot.pause(0.2)

    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_detail)


def test_mode_dialog(snap_compare: SnapCompare) -> None:
    async def open_dialog(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("down", "down", "m")  # create_ticket, under an on-call override
        await pilot.pause(0.2)

    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_dialog)


def test_audit_trail(snap_compare: SnapCompare) -> None:
    async def open_audit(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("a")
        await pilot.pause(0.2)

    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_audit)
