"""The argument surface's coverage (`c`): what the policy checks of each argument, what it does not, what to bind.

One row per argument of each tool (Admin.GetCoverage), with its verdict and
what constrains it; typed-only and unconstrained arguments stand out, since
every value passes them. A tool whose schema lets arguments it does not name
through gets a row saying so. Below, the suggested bindings and why.
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

STYLES = {"unconstrained": "bold red", "typed": "yellow", "unchecked": "bold red"}


class CoverageScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    CoverageScreen #coverage-title { text-style: bold; background: $boost; padding: 0 1; }
    CoverageScreen #coverage { height: 1fr; }
    CoverageScreen #coverage-suggestions { height: auto; max-height: 12; padding: 0 1; overflow-y: auto; }
    """

    def __init__(self, api: AdminApi) -> None:
        super().__init__()
        self.api = api

    def compose(self) -> ComposeResult:
        yield Static("Argument coverage: asking the gateway...", id="coverage-title")
        yield DataTable(cursor_type="row", id="coverage")
        yield Static("", id="coverage-suggestions")
        yield Footer()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("TOOL", "COVERED", "ARGUMENT", "COVERAGE", "CONSTRAINTS")
        title = self.query_one("#coverage-title", Static)
        try:
            found = await self.api.coverage()
        except grpc.aio.AioRpcError as error:
            title.update(Text(f"! the gateway did not answer: {error.code().name}: {error.details()}"))
            return
        for row in rows(found):
            table.add_row(*row)
        title.update(Text(f"Argument coverage of policy {found.policy_version}: {summary(found.counts)}"))
        self.query_one("#coverage-suggestions", Static).update(Text("\n".join(suggestions(found))))


def summary(counts: admin_pb2.CoverageCounts) -> str:
    total = counts.enumerated + counts.checked + counts.typed + counts.unconstrained
    return (
        f"{counts.enumerated + counts.checked} of {total} covered ({100 * counts.covered_share:.1f}%): "
        f"{counts.enumerated} enumerated, {counts.checked} checked, {counts.typed} typed only, "
        f"{counts.unconstrained} unconstrained"
    )


def rows(found: admin_pb2.GetCoverageResponse) -> list[tuple[str | Text, ...]]:
    """A row per argument; the tool and its share on its first row only, so each tool reads as a block."""
    table: list[tuple[str | Text, ...]] = []
    for tool in found.tools:
        counts = tool.counts
        total = counts.enumerated + counts.checked + counts.typed + counts.unconstrained
        block = [_cells(row.argument, row.coverage, ", ".join(row.constraints) or "-") for row in tool.arguments]
        if tool.arguments_left_off:
            block.append(_cells(f"(+{tool.arguments_left_off})", "", "more arguments, counted but not listed"))
        if tool.undeclared_arguments:
            what = f"{tool.undeclared_arguments}: arguments it does not name pass unchecked"
            block.append(_cells("(others)", "unchecked", what))
        if not block:  # it names no argument and its schema refuses any
            block.append(_cells("-", "", "takes no argument"))
        first: tuple[str | Text, ...] = (Text(tool.tool), f"{counts.enumerated + counts.checked}/{total}")
        for index, cells in enumerate(block):
            table.append((*(first if index == 0 else ("", "")), *cells))
    return table


def _cells(argument: str, coverage: str, constraints: str) -> tuple[Text, Text, Text]:
    return Text(argument), Text(coverage, style=STYLES.get(coverage, "")), Text(constraints)


def suggestions(found: admin_pb2.GetCoverageResponse) -> list[str]:
    more = f" (and {found.suggestions_left_off} more)" if found.suggestions_left_off else ""
    lines = [f"Suggested bindings: {len(found.suggestions) or 'none'}{more}"]
    for suggestion in found.suggestions:
        lines.append(f"  {suggestion.tool}.{suggestion.argument} ({suggestion.binding}): {suggestion.reason}")
    return lines
