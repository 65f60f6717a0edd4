"""The TUI's `?` says what to do about a flag in the runbook's own words: docs/operating.md's table and
argwatch.tui.runbook agree, and every flag the table can write has its row."""

from __future__ import annotations

import re
from pathlib import Path

from argwatch.tui.runbook import RUNBOOK, entries_for
from argwatch.tui.status_view import CAUSE_FLAGS

OPERATING = Path(__file__).parents[2] / "docs" / "operating.md"


def runbook_table() -> dict[str, tuple[str, str]]:
    """The table under "What to do about each flag": the first `code` of "you see" -> (means, to do), as
    the TUI writes them (without Markdown's backticks and emphasis)."""
    text = OPERATING.read_text()
    section = text[text.index("### What to do about each flag") :]
    section = section[: section.index("\n### ")]
    rows = {}
    for line in section.splitlines():
        found = re.match(r"\| `([^`]+)`[^|]*\| (.+) \| (.+) \|$", line)
        if found:
            flag, means, todo = found.groups()
            rows[flag] = tuple(cell.replace("`", "").replace("*", "") for cell in (means, todo))
    return rows  # type: ignore[return-value]


def test_each_flags_help_is_the_runbooks_words() -> None:
    table = runbook_table()
    for entry in RUNBOOK:
        assert entry.flag in table, f"{entry.flag} has no row in the runbook table of docs/operating.md"
        assert (entry.means, entry.todo) == table[entry.flag], entry.flag


def test_every_flag_health_can_show_has_its_help() -> None:
    flags = ["SRC-DOWN", "FAIL-CLOSED 12", "FAIL-OPEN 3.4k", "NO-SET", *CAUSE_FLAGS.values(), "STALE", "OOS>5%"]
    flags += ["ABANDONED 9", "EXPIRES 4m", "CLOSED·OBSERVED 12", "STORM 2.4x"]
    for flag in flags:
        assert len(entries_for([flag])) == 1, flag
    assert [entry.flag for entry in entries_for(["SRC-DOWN", "STALE"], refusing=True)] == [
        "SRC-DOWN",
        "STALE",
        "refusing 100%",
    ]
