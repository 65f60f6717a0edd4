"""Before a mode flip, what it would have done: each changed tool's calls over the last 15 minutes.

The gateway counts, per tool and whatever its mode, the calls with at least one
problem (what reject mode refuses) and those with an invented value among them
(WindowFigures.calls_with_problems, calls_with_invented_values), so the figure
is the same for every client of the Admin API.
"""

from __future__ import annotations

from collections.abc import Sequence

from argwatch.tui.status_view import MODE_NAMES, window_of
from argwatch.v1 import admin_pb2

WINDOW = 900
SHOWN_TOOLS = 3  # a global flip names the tools it hits hardest, then the total


def _line(tool: admin_pb2.ToolStatus, target: str) -> tuple[int, str] | None:
    """(calls affected, what `target` would have done to `tool`'s calls), None when it changes nothing."""
    current = MODE_NAMES.get(tool.mode, "")
    if target == current or target not in ("observe", "reject"):
        return None
    figures = window_of(tool, WINDOW)
    hit, calls, invented = figures.calls_with_problems, figures.calls, figures.calls_with_invented_values
    share = f", {100 * hit / calls:.1f}%" if calls else ""
    if target == "reject":
        text = f"reject would have refused {hit} of {calls} calls{share}"
        if hit:
            text += f"; {invented} of them invented values"
    else:
        text = f"observe would have let through {hit} of {calls} calls that reject refused{share}"
    return hit, f"{tool.tool}: {text}"


def impact(tools: Sequence[admin_pb2.ToolStatus], target: str) -> list[str]:
    """What moving `tools` to `target` ("observe" or "reject") would have done over the last 15 minutes."""
    lines = [found for tool in tools if tool.tool != "_unknown" and (found := _line(tool, target)) is not None]
    if not lines:
        return ["no change to any call: already in that mode"]
    lines.sort(key=lambda found: -found[0])
    shown = [text for _, text in lines[:SHOWN_TOOLS]]
    if len(lines) > SHOWN_TOOLS:
        total = sum(hit for hit, _ in lines)
        shown.append(f"... {len(lines) - SHOWN_TOOLS} more tools; {total} calls in all")
    return [f"over the last 15 min, {line}" if index == 0 else line for index, line in enumerate(shown)]
