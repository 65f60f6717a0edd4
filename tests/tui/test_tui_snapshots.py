"""Snapshot tests of the TUI's screens on fixed data and a stopped clock (update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from argwatch.tui.app import ArgwatchApp
from argwatch.tui.audit_screen import AuditScreen
from argwatch.tui.detail_screen import DetailScreen
from argwatch.tui.preview_panel import PreviewPanel
from tests.tui.pilot_helpers import pick, until
from tests.tui.recorded_admin import RecordedAdmin

SIZE = (200, 32)


def offenders(pilot: Pilot[None]) -> str:
    return str(pilot.app.screen.query_one("#offenders", Static).render())


SnapCompare = Callable[..., bool]


def recorded_app() -> ArgwatchApp:
    return ArgwatchApp(RecordedAdmin(), interval=1.0, clock=lambda: 1000.0, live_detail=False)


async def settled(pilot: Pilot[None], condition: Callable[[], bool]) -> None:
    """Lets the app run until `condition` holds (at most 10 s), then until its message queue drains."""
    await until(pilot, condition)
    await pilot.pause()


async def shown(pilot: Pilot[None]) -> None:
    """Waits until the recorded snapshot is in the table."""
    app = pilot.app
    assert isinstance(app, ArgwatchApp)
    await settled(pilot, lambda: app.status is not None)


def test_main_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=shown)


# On-call's terminals: a laptop split in two, a normal window, a wide screen. At each, the flag, tool,
# argument, mode, OOS% and HEALTH show whole; the other columns only when they fit whole.
def test_main_screen_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=shown)


def test_main_screen_at_120x40(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=shown)


def test_main_screen_at_200x50(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(200, 50), run_before=shown)


def test_detail_view(snap_compare: SnapCompare) -> None:
    async def open_detail(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("enter")
        await settled(pilot, lambda: isinstance(pilot.app.screen, DetailScreen) and "CLUSTERED" in offenders(pilot))

    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_detail)


async def open_refund_detail(pilot: Pilot[None]) -> None:
    """The detail of refund_order . reason_code: the windows table with a tool with side effects' repeats."""
    await shown(pilot)
    app = pilot.app
    assert isinstance(app, ArgwatchApp)
    while (row := app.selected_row()) is None or row.argument != "reason_code":
        await pilot.press("down")
    await pilot.press("enter")
    await settled(pilot, lambda: isinstance(pilot.app.screen, DetailScreen) and "CLUSTERED" in offenders(pilot))


# The detail on a laptop split in two and in a normal window: its figures stack, none is cut.
def test_detail_view_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=open_refund_detail)


def test_detail_view_at_120x40(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=open_refund_detail)


async def open_dialog(pilot: Pilot[None]) -> None:
    """The flip dialog of create_ticket (under an on-call override), its preview in."""
    await shown(pilot)
    app = pilot.app
    assert isinstance(app, ArgwatchApp)
    while (row := app.selected_row()) is None or row.tool != "create_ticket":
        await pilot.press("down")
    await pilot.press("m")
    await settled(pilot, lambda: bool(app.screen.query("#preview")) and bool(preview_lines(pilot)))
    await settled(pilot, lambda: app.focused is not None and app.focused.id == "cancel")


def preview_lines(pilot: Pilot[None]) -> tuple[str, ...]:
    return pilot.app.screen.query_one("#preview", PreviewPanel).lines


async def open_check_dialog(pilot: Pilot[None]) -> None:
    """The flip dialog with one check of the tool picked: its own preview."""
    await open_dialog(pilot)
    await pick(pilot, "#target", 1)  # the tool's one check, arg:assignee
    await settled(pilot, lambda: preview_lines(pilot)[:1] == ("change: create_ticket arg:assignee -> reject",))
    await pilot.click("#reason")
    await pilot.press(*"INC-7")
    await pilot.press("tab", *"30m")
    pilot.app.screen.query_one("#cancel").focus()  # no cursor blinking in a field
    await settled(pilot, lambda: bool(preview_lines(pilot)))  # asked again for the expiry typed


def test_mode_dialog(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_dialog)


# A laptop split in two and a normal window: the dialog, its preview and its buttons all on screen, none cut.
def test_mode_dialog_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=open_check_dialog)


def test_mode_dialog_at_120x40(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=open_check_dialog)


def test_audit_trail(snap_compare: SnapCompare) -> None:
    async def open_audit(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("a")
        await settled(
            pilot,
            lambda: isinstance(pilot.app.screen, AuditScreen) and pilot.app.screen.query_one(DataTable).row_count == 2,
        )

    assert snap_compare(recorded_app(), terminal_size=SIZE, run_before=open_audit)


def test_help_screen(snap_compare: SnapCompare) -> None:
    async def open_help(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("question_mark")
        await settled(pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen")

    assert snap_compare(recorded_app(), terminal_size=(120, 48), run_before=open_help)


def test_timeline(snap_compare: SnapCompare) -> None:
    async def open_timeline(pilot: Pilot[None]) -> None:
        await shown(pilot)
        await pilot.press("e")
        await settled(
            pilot,
            lambda: (
                type(pilot.app.screen).__name__ == "TimelineScreen"
                and pilot.app.screen.query_one(DataTable).row_count == 5
            ),
        )

    assert snap_compare(recorded_app(), terminal_size=(120, 24), run_before=open_timeline)


# One glance during an incident: the sources down named above the table (address, error, what they serve,
# the tools), refunds refusing every call now with agents retrying (STORM), a fail-closed check on an observed
# tool (CLOSED·OBSERVED, not FAIL-CLOSED), and the overrides below a tool in MODE.
def incident_app() -> ArgwatchApp:
    return ArgwatchApp(RecordedAdmin(incident=True), interval=1.0, clock=lambda: 1000.0, live_detail=False)


def test_incident_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(incident_app(), terminal_size=(80, 24), run_before=shown)


def test_incident_at_120x40(snap_compare: SnapCompare) -> None:
    assert snap_compare(incident_app(), terminal_size=(120, 40), run_before=shown)
