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
    ("s", "cycle the sort: attention, out-of-set rate, calls/s, fail-open, name"),
    ("m", "change the selected tool's mode (asks for a reason)"),
    ("g", "set or clear the global override (every tool)"),
    ("r", "refresh the selected row's value set from its source"),
    ("a", "the audit trail of mode changes"),
    ("e", "the incident timeline: what changed, newest first"),
    ("c", "coverage: what the policy checks of each argument, and what it does not"),
    ("q", "quit"),
)
CHANGING = {"m", "g", "r"}
FLAGS = (
    ("FAIL-OPEN n", "checks skipped (set unavailable): they did not check"),
    ("FAIL-CLOSED n", "checks that could not run: refused in reject mode"),
    ("STALE", "the set is not fresh; a flag before it may say why:"),
    ("REFUSED", "  the source's update was refused (detail: reason)"),
    ("TOO-LARGE", "  the owner's set is over max_members"),
    ("NOT-SERVED", "  the source does not serve this set"),
    ("UNCONFIRMED", "  the source is up but silent past the TTL"),
    ("SAVED-COPY", "  the copy saved on disk, until the source answers"),
    ("SRC-DOWN", "the set's source is unreachable"),
    ("NO-SET", "no usable copy of the set: its checks are skipped"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 90; height: auto; max-height: 100%; border: thick $primary; padding: 0 1;
                            background: $surface; overflow-y: auto; }
    """

    def __init__(self, readonly: bool) -> None:
        super().__init__()
        self._readonly = readonly

    def compose(self) -> ComposeResult:
        lines = [f"{key:>10}  {what}" for key, what in KEYS if not (self._readonly and key in CHANGING)]
        legend = [
            "",
            "Rows: a tool and one argument it checks; its rows stay together, worst first.",
            "  _call      the tool's call-level problems (unknown arguments, malformed JSON)",
            "  _unknown   calls naming a tool the policy does not have (the model invented it)",
            "  -          a tool the policy checks no argument of",
            "Columns (narrow screens show the first ones; the rest as width allows):",
            "  MODE       observe or reject, with (override) or (global) when on-call forced it",
            "             ((ovr) and (glb) on a narrow screen)",
            "  OOS%       values not in their set; NORM% after normalisation (case, separators)",
            "  CALLS/S    the tool's calls a second;  PROBLEMS  every problem on the argument",
            "  REPAIR     succeeded/abandoned/open: repairs started by rejected calls",
            "  REPEATS    repeated calls of a tool with side effects;  SET AGE  since confirmed",
            "A row marked ! needs attention; HEALTH says why (flags that do not fit: +N):",
            *(f"  {flag:<15}{what}" for flag, what in FLAGS),
        ]
        if self._readonly:
            legend.append("Read-only: mode changes and refreshes are hidden.")
        with Vertical():
            yield Static("\n".join(["Keys", "", *lines, *legend]))
