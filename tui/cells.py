"""One cell of the main table as drawn: HEALTH's flags fitted whole, trouble in bold red, figures right-aligned."""

from __future__ import annotations

from rich.text import Text

from argwatch.tui.layout import fit_flags
from argwatch.tui.status_view import COLUMNS, REFUSING_MOST, Row

_COLUMN_INDEX = {key: index for index, (_label, key, _width) in enumerate(COLUMNS)}
_FLAGGED = {"flag", "health"}


def styled_cell(row: Row, key: str, width: int) -> Text:
    """One cell as drawn: HEALTH as the flags that fit whole, the rest as computed."""
    cell = row.cells[_COLUMN_INDEX[key]]
    if key == "health" and row.flags:
        cell = fit_flags(row.flags, width)
    if key in _FLAGGED and row.unhealthy:
        return Text(cell, style="bold red")
    if key == "mode" and row.refusing >= REFUSING_MOST:
        return Text(cell, style="bold red")
    if key == "spark":
        return Text(cell, style="yellow")
    if key in ("rate", "oos", "norm", "problems", "open"):
        return Text(cell, justify="right")
    return Text(cell)
