"""Helpers for driving the TUI with Pilot: waiting for a condition while the app runs."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import Static

from argwatch.tui.app import ArgwatchApp


async def until(pilot: Pilot[None], condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Lets the app run until `condition` holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the TUI did not get there within {seconds}s")
        await pilot.pause(0.05)


def banner(app: ArgwatchApp) -> str:
    return str(app.query_one("#banner", Static).render())


def table_rows(app: ArgwatchApp) -> list[tuple[str, str]]:
    """The (tool, argument) of each row the table shows, top to bottom."""
    from textual.widgets import DataTable

    table = app.query_one("#table", DataTable)
    return [(str(table.get_row_at(i)[1]), str(table.get_row_at(i)[2])) for i in range(table.row_count)]


def screen_lines(app: ArgwatchApp) -> list[str]:
    """The screen as on-call sees it, one string per terminal line (what a snapshot holds, as text)."""
    # The compositor's strips: the only way to read what was drawn, cuts and all, rather than what was meant.
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


async def until_on_screen(pilot: Pilot[None], condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """`until`, and when it fails, the screen as it was in the message: what a layout test needs to see."""
    try:
        await until(pilot, condition, seconds)
    except AssertionError as error:
        app = pilot.app
        assert isinstance(app, ArgwatchApp)
        raise AssertionError(f"{error}; the screen:\n" + "\n".join(screen_lines(app))) from None


async def pick(pilot: Pilot[None], selector: str, downs: int) -> None:
    """Chooses in a Select as on-call does from the keyboard: Tab to it, Enter opens it on the option chosen now,
    `downs` times Down, Enter."""
    pilot.app.screen.query_one(selector).focus()  # where Tab would land: the keys below are what is tested
    await pilot.press("enter", *["down"] * downs, "enter")
