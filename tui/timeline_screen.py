"""The incident timeline (`e`): what changed, newest first, refreshed while it is open.

Mode changes and policy reloads, sets going stale or refusing updates and coming back,
sources connecting and disconnecting, steps in an argument's out-of-set rate: what
on-call reads first when paged (Admin.ListEvents).
"""

from __future__ import annotations

from typing import ClassVar

import grpc
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from argwatch.tui.admin_client import AdminApi
from argwatch.v1 import admin_pb2

SHOWN = 200
REFRESH_SECONDS = 2.0
# Kinds that mean something broke, shown in bold.
ALARMING = ("stale", "refused", "disconnected", "too large", "does not serve", "up:", "refused:")


class TimelineScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    TimelineScreen #timeline-title { text-style: bold; background: $boost; padding: 0 1; }
    """

    def __init__(self, api: AdminApi, live: bool = True) -> None:
        super().__init__()
        self.api = api
        self._live = live
        self._shown: list[tuple[int, str, str, str]] = []

    def compose(self) -> ComposeResult:
        yield Static("What changed, newest first", id="timeline-title")
        yield DataTable(cursor_type="row", id="timeline")
        yield Footer()

    async def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("WHEN (UTC)", "KIND", "WHAT", "DETAIL")
        await self.refresh_events()
        if self._live:
            self.set_interval(REFRESH_SECONDS, self.refresh_events)

    async def refresh_events(self) -> None:
        title = self.query_one("#timeline-title", Static)
        try:
            events = await self.api.events(SHOWN)
        except grpc.aio.AioRpcError as error:
            title.update(Text(f"! the gateway did not answer: {error.code().name}: {error.details()}"))
            return
        keys = [(e.at.ToNanoseconds(), e.kind, e.subject, e.detail) for e in events]
        if keys == self._shown:
            return
        self._shown = keys
        table = self.query_one(DataTable)
        table.clear()
        for event in events:
            table.add_row(*_cells(event))
        title.update("What changed, newest first" if events else "Nothing has changed since the gateway started")


def _cells(event: admin_pb2.Event) -> tuple[str | Text, ...]:
    alarming = any(word in event.detail for word in ALARMING)
    return (
        f"{event.at.ToDatetime():%Y-%m-%d %H:%M:%S}",
        event.kind,
        Text(event.subject),
        Text(event.detail, style="bold" if alarming else ""),
    )
