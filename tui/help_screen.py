"""The help (`?`): what to do about the selected row's flags, from the runbook, then the keys and the legend."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from argwatch.tui.runbook import RUNBOOK, Entry

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
    ("d", "the shadow policy: the calls it would have decided differently, with examples"),
    ("q", "quit"),
)
CHANGING = {"m", "g", "r"}


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 90; max-width: 100%; height: auto; max-height: 100%; border: thick $primary;
                            padding: 0 1; background: $surface; overflow-y: auto; }
    """

    def __init__(self, readonly: bool, subject: str = "", flags: list[Entry] | None = None) -> None:
        """`flags`: the runbook's rows for the selected row (`subject`, "tool . argument"), shown first."""
        super().__init__()
        self._readonly = readonly
        self._subject = subject
        self._flags = flags or []

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
            "             ((ovr) and (glb) on a narrow screen), refusing N%: the share of its",
            "             calls refused now (the last 15 s), and overrides below the tool:",
            "             1 check observe, orders fails open (narrow: +1 ovr, or refusing N%+)",
            "Above the table: each source down, its address and error, what it serves, the tools.",
            "  OOS%       values not in their set; NORM% after normalisation (case, separators)",
            "  CALLS/S    the tool's calls a second;  PROBLEMS  every problem on the argument",
            "  REPAIR     succeeded/abandoned/open: repairs started by rejected calls",
            "  REPEATS    repeated calls of a tool with side effects;  SET AGE  since confirmed",
            "A row marked ! needs attention; HEALTH says why, what to act on first (flags that do not fit: +N):",
            *(f"  {entry.flag:<18}{entry.means}" for entry in RUNBOOK),
        ]
        if self._readonly:
            legend.append("Read-only: mode changes and refreshes are hidden.")
        with Vertical():
            if self._flags:
                yield Static(_what_to_do(self._subject, self._flags), id="what-to-do")
            yield Static("\n".join(["Keys", "", *lines, *legend]))


def _what_to_do(subject: str, flags: list[Entry]) -> str:
    """The selected row's flags, each with what it means and what to do, in the runbook's words."""
    lines = [f"What to do about {subject} (the runbook, docs/operating.md)", ""]
    for entry in flags:
        lines.extend((f"{entry.flag}: {entry.means}", f"  what to do: {entry.todo}", ""))
    return "\n".join(lines)
