"""The key help (`?`)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("?", "this help"),
    ("/", "filter rows by tool or argument (Esc clears)"),
    ("Enter", "detail of the selected row"),
    ("^Home/^End", "first / last row (PgUp/PgDn page)"),
    ("Esc", "back"),
    ("w", "cycle the window: 1m, 15m, 1h"),
    ("m", "change the selected tool's mode (asks for a reason)"),
    ("g", "set or clear the global override (every tool)"),
    ("r", "refresh the selected row's value set from its source"),
    ("a", "the audit trail of mode changes"),
    ("q", "quit"),
)
CHANGING = {"m", "g", "r"}


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 84; height: auto; border: thick $primary; padding: 1 2; background: $surface; }
    """

    def __init__(self, readonly: bool) -> None:
        super().__init__()
        self._readonly = readonly

    def compose(self) -> ComposeResult:
        lines = [f"{key:>10}  {what}" for key, what in KEYS if not (self._readonly and key in CHANGING)]
        legend = [
            "",
            "A row marked ! needs attention; HEALTH says why:",
            "  FAIL-OPEN n  checks skipped (source unavailable): they did not check",
            "  FAIL-CLOSED n  checks that could not run: each a problem (refused in reject mode)",
            "  STALE        the set was not confirmed within its TTL",
            "  SRC-DOWN     the set's source is unreachable",
            "  NO-SET       no usable copy of the set: its checks are skipped",
            "MODE says (override) or (global) when on-call forced it.",
        ]
        if self._readonly:
            legend.append("Read-only: mode changes and refreshes are hidden.")
        with Vertical():
            yield Static("\n".join(["Keys", "", *lines, *legend]))
