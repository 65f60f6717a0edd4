"""The shadow policy's differences (`d`): per tool and kind, the calls it would have decided otherwise, with examples.

One block per tool and kind (Admin.GetShadowReport): the count on its first
row, then a row per example (newest first): the call id, both decisions and
both sides' problems. Above, the shadow's version and how many calls it
judged; below, what promoting it would change. Promoting is not a key here:
`argwatch shadow promote` shows the same report and asks for a reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import grpc
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from argwatch.tui.admin_client import AdminApi
from argwatch.v1 import admin_pb2

KIND_STYLES = {"would_refuse": "bold red", "would_allow": "yellow", "different_problems": ""}
SHOWN_TOOLS = 10  # names per line of the promotion's diff


class ShadowScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    ShadowScreen #shadow-title { text-style: bold; background: $boost; padding: 0 1; }
    ShadowScreen #shadow { height: 1fr; }
    ShadowScreen #shadow-promote { height: auto; max-height: 6; padding: 0 1; }
    """

    def __init__(self, api: AdminApi) -> None:
        super().__init__()
        self.api = api

    def compose(self) -> ComposeResult:
        yield Static("Shadow policy: asking the gateway...", id="shadow-title")
        yield DataTable(cursor_type="row", id="shadow")
        yield Static("", id="shadow-promote")
        yield Footer()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("TOOL", "KIND", "CALLS", "CALL", "LIVE", "SHADOW", "PROBLEMS (THE SHADOW'S, WITH VALUES)")
        title = self.query_one("#shadow-title", Static)
        try:
            report = await self.api.shadow_report()
        except grpc.aio.AioRpcError as error:
            title.update(Text(f"! the gateway did not answer: {error.code().name}: {error.details()}"))
            return
        title.update(Text(heading(report)))
        for row in rows(report):
            table.add_row(*row)
        self.query_one("#shadow-promote", Static).update(Text("\n".join(promotion(report))))


# A call id is shown this long at most: enough to find it (`argwatch decisions grep --call-id`), not the row.
CALL_ID_CHARS = 14


def heading(report: admin_pb2.GetShadowReportResponse) -> str:
    if not report.loaded:
        return "No shadow policy is set (argwatch shadow set FILE --reason ...)"
    unavailable = f"; sets unavailable to it: {', '.join(report.unavailable_sets)}" if report.unavailable_sets else ""
    return (
        f"Shadow policy {report.shadow_version} ({report.name}): {report.calls} calls judged, "
        f"{report.busy} not judged (busy), {report.raised} raised{unavailable}"
    )


def rows(report: admin_pb2.GetShadowReportResponse) -> list[tuple[str | Text, ...]]:
    """A block per tool and kind: its count on the first row, an example per row."""
    table: list[tuple[str | Text, ...]] = []
    for row in report.differences:
        first: tuple[str | Text, ...] = (
            Text(row.tool),
            Text(row.kind, style=KIND_STYLES.get(row.kind, "")),
            str(row.count),
        )
        examples = [_example(found) for found in row.examples] or [(Text("-"), Text(""), Text(""), Text(""))]
        for index, cells in enumerate(examples):
            table.append((*(first if index == 0 else ("", "", "")), *cells))
    if report.loaded and not report.differences:
        table.append((Text("-"), Text("no call judged differently"), "", Text(""), Text(""), Text(""), Text("")))
    return table


def _example(found: admin_pb2.ShadowExample) -> tuple[Text, Text, Text, Text]:
    """The call (its id cut: the problems need the width), both decisions, and the shadow's problems; the live
    ones too where they are not the same codes at the same paths."""
    call_id = found.call_id or "(no call id)"
    shown = call_id if len(call_id) <= CALL_ID_CHARS else call_id[: CALL_ID_CHARS - 1] + "…"
    problems = _problems(found.shadow_problems, values=True)
    if _places(found.live_problems) != _places(found.shadow_problems):
        problems += f" · live: {_problems(found.live_problems, values=False)}"
    return Text(shown), Text(found.live_decision), Text(found.shadow_decision), Text(problems)


def _places(problems: Iterable[admin_pb2.ShadowProblem]) -> set[tuple[str, str]]:
    return {(problem.code, problem.path) for problem in problems}


def _problems(problems: Iterable[admin_pb2.ShadowProblem], values: bool) -> str:
    shown = [f"{p.code}@{p.path or '(call)'}" + (f"={p.value}" if values and p.value else "") for p in problems]
    return ", ".join(shown) or "no problems"


def promotion(report: admin_pb2.GetShadowReportResponse) -> list[str]:
    if not report.loaded:
        return []
    lines = [f"Promoting replaces live {report.live_version} with {report.shadow_version} (argwatch shadow promote):"]
    for label, names in (
        ("added", report.tools_added),
        ("removed", report.tools_removed),
        ("changed", report.tools_changed),
    ):
        more = f" and {len(names) - SHOWN_TOOLS} more" if len(names) > SHOWN_TOOLS else ""
        lines.append(f"  tools {label}: {', '.join(names[:SHOWN_TOOLS]) or 'none'}{more}")
    return lines
