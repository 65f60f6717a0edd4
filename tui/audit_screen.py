"""The audit trail of mode changes: who, when, old -> new, why, until when, and what happened."""

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


class AuditScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    AuditScreen #audit-title { text-style: bold; background: $boost; padding: 0 1; }
    """

    def __init__(self, api: AdminApi) -> None:
        super().__init__()
        self.api = api

    def compose(self) -> ComposeResult:
        yield Static("Mode changes, newest first", id="audit-title")
        yield DataTable(cursor_type="row", id="audit")
        yield Footer()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("WHEN (UTC)", "WHO", "TOOL", "OLD -> NEW", "OUTCOME", "EXPIRES (UTC)", "REASON")
        try:
            changes = await self.api.mode_changes(SHOWN)
        except grpc.aio.AioRpcError as error:
            self.query_one("#audit-title", Static).update(
                Text(f"! the gateway did not answer: {error.code().name}: {error.details()}")
            )
            return
        for change in changes:
            table.add_row(*_cells(change))
        if not changes:
            self.query_one("#audit-title", Static).update("No mode changes yet")


def _cells(change: admin_pb2.ModeChange) -> tuple[str | Text, ...]:
    expires = f"{change.expires_at.ToDatetime():%Y-%m-%d %H:%M:%S}" if change.HasField("expires_at") else "-"
    outcome = Text(change.outcome, style="bold" if change.outcome.startswith("refused") else "")
    return (
        f"{change.at.ToDatetime():%Y-%m-%d %H:%M:%S}",
        Text(change.actor),
        Text(change.tool or "(global)"),
        f"{change.old_mode or 'none'} -> {change.new_mode or 'none'}",
        outcome,
        expires,
        Text(change.reason),
    )
