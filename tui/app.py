"""The on-call TUI: a live table per tool and argument, a detail view, and audited mode changes.

It speaks to one gateway's Admin API. Every figure it shows comes from the
newest snapshot; when snapshots stop (the gateway unreachable, or the stream
stalled) the banner says NOT LIVE and how old the figures are, the table is
dimmed, and the feed reconnects by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

import grpc
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from argwatch.tui.admin_client import AdminApi
from argwatch.tui.audit_screen import AuditScreen
from argwatch.tui.cells import styled_cell
from argwatch.tui.coverage_screen import CoverageScreen
from argwatch.tui.detail_screen import DetailScreen
from argwatch.tui.feed import Lost, Snapshot, follow
from argwatch.tui.flip_targets import flip_targets
from argwatch.tui.help_screen import HelpScreen
from argwatch.tui.layout import Layout, layout
from argwatch.tui.mode_dialog import ModeDialog
from argwatch.tui.ordering import SORT_NAMES, SORTS, order_rows
from argwatch.tui.runbook import entries_for
from argwatch.tui.shadow_screen import ShadowScreen
from argwatch.tui.source_lines import source_lines
from argwatch.tui.status_view import (
    COLUMNS,
    MODE_NAMES,
    WIDTHS,
    WINDOW_NAMES,
    WINDOWS,
    Row,
    RowSource,
    Selected,
    health_flags,
    mode_cell,
    refusing_share,
    row_cells,
    row_key,
    row_sources,
    summary,
)
from argwatch.tui.timeline_screen import TimelineScreen
from argwatch.v1 import admin_pb2

STALLED_AFTER_INTERVALS = 3  # no snapshot for this many intervals: the figures are not live any more
REFRESH_OUTCOMES: dict[int, tuple[str, SeverityLevel]] = {
    admin_pb2.REFRESH_OUTCOME_NEW_VERSION: ("new version", "information"),
    admin_pb2.REFRESH_OUTCOME_CONFIRMED: ("confirmed", "information"),
    admin_pb2.REFRESH_OUTCOME_REFUSED: ("refused: the last good copy stays", "warning"),
    admin_pb2.REFRESH_OUTCOME_UNREACHABLE: ("the source did not answer", "error"),
    admin_pb2.REFRESH_OUTCOME_NOT_SERVED: ("the source does not serve this set", "error"),
}
CHANGING_ACTIONS = frozenset({"mode", "global_mode", "refresh_set"})
_COLUMN_KEYS = [key for _label, key, _width in COLUMNS]
_COLUMN_INDEX = {key: index for index, key in enumerate(_COLUMN_KEYS)}
_LABELS = {key: label for label, key, _width in COLUMNS}
PINNED_COLUMNS = 3  # the flag, tool and argument stay in view when the table scrolls sideways
# Worst-first moves rows as figures change; re-sorting rebuilds the table (slow at 1,000 rows), so the
# order is kept this long unless the rows, the sort or the filter change.
RESORT_SECONDS = 5.0
FILTER_PAUSE_SECONDS = 0.25
# The tools a snapshot carries: the gateway sends the ones most in need of on-call first (TOOL_ORDER_ATTENTION),
# matching the filter. At 10,000 tools the whole snapshot is 6 MB and over a second of the gateway's loop;
# `/` reaches any tool by name.
TOOLS_SHOWN = 200
MAX_FILTER_SENT = 200  # characters of the filter the gateway matches tools with (its limit)
_BLANK = Text("")
VIEW_MARGIN_ROWS = 10  # rows drawn beyond the view, so a short scroll shows drawn rows


class ArgwatchApp(App[None]):
    """`argwatch tui`: watch one gateway and, unless read-only, change modes on it."""

    TITLE = "argwatch"
    BINDINGS: ClassVar[list[BindingType]] = [
        # `?` and `q` first: the footer cuts what does not fit, and these two must show at any width.
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
        # `/` filters, as in k9s and less; out of the footer so that every other key fits 80 columns.
        Binding("slash", "filter", "filter", show=False),
        Binding("w", "next_window", "window"),
        Binding("s", "next_sort", "sort"),
        Binding("m", "mode", "mode"),
        Binding("g", "global_mode", "global"),
        Binding("r", "refresh_set", "refresh set"),
        Binding("a", "audit", "audit"),
        Binding("e", "timeline", "timeline"),
        # Not in the footer, which 80 columns fill: `?` lists every key.
        Binding("c", "coverage", "coverage", show=False),
        Binding("d", "shadow", "shadow", show=False),
        Binding("escape", "go_back", "back", show=False),
    ]
    CSS = """
    #banner { height: 1; padding: 0 1; background: $success-darken-2; color: $text; }
    #banner.lost { background: $error; text-style: bold; height: auto; max-height: 3; }
    #summary { height: auto; max-height: 4; padding: 0 1; background: $boost; }
    #sources { height: auto; max-height: 6; padding: 0 1; background: $error-darken-3; text-style: bold; }
    #table { height: 1fr; }
    #table.stale { text-opacity: 55%; }
    #filter { dock: bottom; display: none; }
    #filter.shown { display: block; }
    """

    def __init__(
        self,
        api: AdminApi,
        *,
        interval: float = 1.0,
        readonly: bool = False,
        clock: Callable[[], float] = time.monotonic,
        live_detail: bool = True,
    ) -> None:
        super().__init__()
        self.api = api
        self.interval = interval
        self.readonly = readonly
        self._clock = clock
        self._live_detail = live_detail
        self.status: admin_pb2.GetStatusResponse | None = None
        self.window = WINDOWS[0]
        self.query_text = ""
        self._watched_text = ""  # the filter the snapshots are selected by
        self._received_at: float | None = None
        self._lost: Lost | None = None
        self._lost_at: float | None = None
        self._keys: list[str] = []
        self._sources: dict[str, RowSource] = {}
        self._filter_timer: Timer | None = None
        self._drawn: dict[str, Row] = {}  # the cells on screen, per row key (rows not yet in view: none)
        self.sort = SORTS[0][0]
        self._sorted_at = -float("inf")
        self._order: list[str] = []  # the row keys in the order last sorted
        self._layout: Layout | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"connecting to {self.api.target}..."), id="banner")
        yield Static("", id="summary")
        yield Static("", id="sources")  # a line per source down: what to restore, before the rows it breaks
        table: DataTable[str | Text] = DataTable(cursor_type="row", id="table")
        table.fixed_columns = PINNED_COLUMNS
        for label, key, width in COLUMNS:
            table.add_column(label, key=key, width=max(width, len(label)))
        yield table
        yield Input(placeholder="filter: part of a tool or argument name (Enter keeps it, Esc clears)", id="filter")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#table", DataTable)
        table.focus()
        self.watch(table, "scroll_y", lambda _: self._draw_visible(), init=False)
        self.run_worker(self._follow(), exclusive=True, group="feed")
        self.set_interval(0.5, self._show_banner)

    def on_resize(self) -> None:
        # Another width may show other columns (layout.py): rebuilt when it does, else redrawn.
        self.call_after_refresh(self._render_rows)

    def selection(self) -> admin_pb2.StatusSelection:
        """The tools the TUI asks the gateway for: the filter's, most in need first, TOOLS_SHOWN of them."""
        return admin_pb2.StatusSelection(
            contains=self._watched_text[:MAX_FILTER_SENT],
            order=admin_pb2.TOOL_ORDER_ATTENTION,
            max_tools=TOOLS_SHOWN,
        )

    async def _follow(self) -> None:
        async for event in follow(self.api, self.interval, self.selection()):
            try:
                if isinstance(event, Snapshot):
                    self.show_status(event.status)
                else:
                    self._lose(event)
            except NoMatches:
                # The table is gone only while the app is being torn down: a snapshot that
                # arrives then has nowhere to go (seen on a loaded CI machine as a failed worker).
                return

    # -- what arrives -------------------------------------------------------------------------

    def show_status(self, status: admin_pb2.GetStatusResponse) -> None:
        """A new snapshot: the table, the summary, the banner and any open detail view follow it."""
        self.status = status
        self._received_at = self._clock()
        self._lost = self._lost_at = None
        self._render_rows()
        self.query_one("#summary", Static).update(Text(summary(status)))
        lines = source_lines(status)
        sources = self.query_one("#sources", Static)
        sources.display = bool(lines)
        sources.update(Text("\n".join(lines)))
        self._show_banner()
        for screen in self.screen_stack:
            if isinstance(screen, DetailScreen):
                screen.show(status)

    def _lose(self, lost: Lost) -> None:
        if self._lost_at is None:
            self._lost_at = self._clock()
        self._lost = lost
        self._show_banner()

    def _show_banner(self) -> None:
        try:
            banner = self.query_one("#banner", Static)
            table = self.query_one("#table", DataTable)
        except NoMatches:  # the timer fired while the app is being torn down
            return
        now = self._clock()
        window = f"window {WINDOW_NAMES[self.window]} | sort: {SORT_NAMES[self.sort]}"
        shown = f" | filter '{self.query_text}'" if self.query_text else ""
        if self.query_text and self.status is not None and not self._keys:
            shown += ": NO ROW MATCHES"  # an empty table must not read as "nothing to see"
        if self.status is not None and self.status.tools_matched > len(self.status.tools):
            # Not every tool is here: say so, and how to reach the others.
            shown += (
                f" | {len(self.status.tools):,} of {self.status.tools_matched:,} tools, "
                "most in need first (/ finds others)"
            )
        age = None if self._received_at is None else now - self._received_at
        stalled = age is not None and age > STALLED_AFTER_INTERVALS * self.interval
        if self._lost is None and not stalled:
            text = (
                f"connecting to {self.api.target}..."
                if age is None
                else f"LIVE  updated {age:.1f}s ago | {self.api.target} | {window}{shown}"  # most needed first
            )
            banner.update(Text(text))
            banner.remove_class("lost")
            table.remove_class("stale")
            return
        figures = "no figures yet" if age is None else f"figures below are {age:.0f}s old"
        if self._lost is not None:
            down = now - (self._lost_at or now)
            why = f"{self.api.target} unreachable for {down:.0f}s, reconnecting | {self._lost.reason}"
        else:
            why = f"no update from {self.api.target} for {age:.0f}s"
        # What matters first: not live, and how old the figures are; the (long) gRPC reason last, on up to
        # three lines (a one-line banner cut it at the screen's edge).
        banner.update(Text(f"NOT LIVE: {figures} | {window}{shown} | {why}"))
        banner.add_class("lost")
        table.add_class("stale")

    def _render_rows(self) -> None:
        """Lists every row, but draws cells only for the rows in view (and a margin): at 200 tools x 5
        arguments, drawing all 1000 rows every second would take most of that second."""
        if self.status is None:
            return
        table = self.query_one("#table", DataTable)
        sources = row_sources(self.status, self.query_text)
        self._sources = {source.key: source for source in sources}
        now = self._clock()
        if set(self._sources) != set(self._order) or now - self._sorted_at >= RESORT_SECONDS:
            self._order = [source.key for source in order_rows(sources, self.sort, self.window)]
            self._sorted_at = now
        keys = list(self._order)
        shown = self._layout_for(sources)
        if keys != self._keys or shown != self._layout:
            selected = self.selected_key()
            self._keys, self._drawn = [], {}  # clearing scrolls, and a scroll draws: nothing to draw until rebuilt
            table.clear(columns=True)
            for key in shown.columns:
                table.add_column(_LABELS[key], key=key, width=shown.widths[key])
            blank = [_BLANK] * len(shown.columns)  # one shared Text: a str would be parsed as markup 13,000 times
            for key in keys:
                table.add_row(*blank, key=key)
            self._keys, self._drawn, self._layout = keys, {}, shown
            if selected in keys:
                table.move_cursor(row=keys.index(selected))
        self._draw_visible()

    def _layout_for(self, sources: list[RowSource]) -> Layout:
        """The columns that fit the screen now, each as wide as its widest content (names) or header."""
        widths = {key: max(width, len(_LABELS[key])) for key, width in WIDTHS.items()}
        widths["tool"] = max([len(_LABELS["tool"]), *(len(source.tool_name) for source in sources)])
        widths["argument"] = max([len(_LABELS["argument"]), *(len(source.argument_name) for source in sources)])
        # MODE grows to "reject · refusing 100%" while a tool refuses: the columns after it give way, not it.
        widths["mode"] = max(
            [widths["mode"], *(len(mode_cell(s.tool, failures=s.failures)) for s in self._tools_of(sources))]
        )
        return layout(self.size.width or 200, widths, _COLUMN_KEYS)

    @staticmethod
    def _tools_of(sources: list[RowSource]) -> list[RowSource]:
        """One row of each tool (a tool has a row per argument)."""
        return list({source.tool_name: source for source in sources}.values())

    def _draw_visible(self) -> None:
        """Fills or updates the cells of the rows in view from the newest snapshot, changed cells only."""
        if self.status is None or not self._keys:
            return
        table = self.query_one("#table", DataTable)
        first = max(int(table.scroll_y) - VIEW_MARGIN_ROWS, 0)
        last = min(int(table.scroll_y) + table.size.height + VIEW_MARGIN_ROWS, len(self._keys))
        shown = self._layout
        if shown is None:
            return
        for key in self._keys[first:last]:
            source = self._sources.get(key)
            if source is None:
                continue
            row = row_cells(source, self.window, shown.short_modes)
            before = self._drawn.get(key)
            if before is not None and before.cells == row.cells:
                continue
            for column in shown.columns:
                index = _COLUMN_INDEX[column]
                if before is None or before.cells[index] != row.cells[index] or before.unhealthy != row.unhealthy:
                    table.update_cell(key, column, styled_cell(row, column, shown.widths[column]))
            self._drawn[key] = row

    # -- selection --------------------------------------------------------------------------------

    def selected_key(self) -> str | None:
        table = self.query_one("#table", DataTable)
        if not self._keys or table.cursor_row < 0 or table.cursor_row >= len(self._keys):
            return None
        return self._keys[table.cursor_row]

    def selected_row(self) -> Selected | None:
        """The row in the open detail view, else the table's selected row."""
        source = self._selected_source()
        return Selected.of(source) if source is not None else None

    def _selected_source(self) -> RowSource | None:
        screen = self.screen
        key = row_key(screen.tool, screen.argument) if isinstance(screen, DetailScreen) else self.selected_key()
        return self._sources.get(key) if key is not None else None

    # -- keys ---------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """--readonly hides every action that changes something."""
        return not (self.readonly and action in CHANGING_ACTIONS)

    def action_help(self) -> None:
        """The help, opening on what to do about the selected row's flags (the runbook's words)."""
        source = self._selected_source()
        if source is None:
            self.push_screen(HelpScreen(self.readonly))
            return
        flags = entries_for(health_flags(source, self.window), refusing=refusing_share(source.tool) > 0)
        self.push_screen(HelpScreen(self.readonly, f"{source.tool_name} . {source.argument_name}", flags))

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.add_class("shown")
        field.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # Rebuilding 1000 rows is slow: apply the filter once typing pauses, not on every key.
        self.query_text = event.value
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_PAUSE_SECONDS, self._apply_filter)

    def _apply_filter_now(self) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self.query_text = ""
        self._apply_filter()

    def _apply_filter(self) -> None:
        self._filter_timer = None
        self._render_rows()
        self._show_banner()
        if self.query_text.strip().lower() != self._watched_text:
            # The gateway picks the tools by the filter too: a tool beyond the TOOLS_SHOWN sent is found by name.
            self._watched_text = self.query_text.strip().lower()
            self.run_worker(self._follow(), exclusive=True, group="feed")

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.query_one("#table", DataTable).focus()

    def action_go_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()
            return
        field = self.query_one("#filter", Input)
        if field.has_class("shown"):
            field.value = ""
            field.remove_class("shown")
            self._apply_filter_now()
            self.query_one("#table", DataTable).focus()

    def action_next_window(self) -> None:
        self.window = WINDOWS[(WINDOWS.index(self.window) + 1) % len(WINDOWS)]
        self._sorted_at = -float("inf")  # the order follows the window's figures at once
        self._render_rows()
        self._show_banner()

    def action_next_sort(self) -> None:
        keys = [key for key, _ in SORTS]
        self.sort = keys[(keys.index(self.sort) + 1) % len(keys)]
        self._sorted_at = -float("inf")
        self._render_rows()
        self._show_banner()

    @on(DataTable.RowSelected, "#table")
    def _open_detail(self, event: DataTable.RowSelected) -> None:
        source = self._sources.get(str(event.row_key.value))
        if source is None:
            return
        row = Selected.of(source)
        detail = DetailScreen(self.api, row.tool, row.argument, live_side=self._live_detail)
        self.push_screen(detail)
        if self.status is not None:
            detail.call_after_refresh(detail.show, self.status)

    def action_audit(self) -> None:
        if not isinstance(self.screen, AuditScreen):
            self.push_screen(AuditScreen(self.api))

    def action_timeline(self) -> None:
        if not isinstance(self.screen, TimelineScreen):
            self.push_screen(TimelineScreen(self.api, live=self._live_detail))

    def action_coverage(self) -> None:
        if not isinstance(self.screen, CoverageScreen):
            self.push_screen(CoverageScreen(self.api))

    def action_shadow(self) -> None:
        if not isinstance(self.screen, ShadowScreen):
            self.push_screen(ShadowScreen(self.api))

    def action_mode(self) -> None:
        row = self.selected_row()
        if row is not None and row.tool == "_unknown":
            self.notify(
                "_unknown holds calls of tools the policy does not have: there is no mode of theirs to change "
                "(g sets the global override)",
                severity="warning",
            )
            return
        if row is None or self.status is None:
            self.notify("select a tool's row first", severity="warning")
            return
        tool = next(t for t in self.status.tools if t.tool == row.tool)
        mode, policy_mode = MODE_NAMES.get(tool.mode, "-"), MODE_NAMES.get(tool.policy_mode, "")
        targets, until = flip_targets(tool, self.status), _until(tool)
        dialog = ModeDialog(row.tool, mode, tool.mode_source or "policy", self.api.preview, until, policy_mode, targets)
        self.push_screen(dialog, self._change_mode)

    def action_global_mode(self) -> None:
        if self.status is None:
            self.notify("no status from the gateway yet", severity="warning")
            return
        current = MODE_NAMES.get(self.status.global_mode, "none")
        # The global override's expiry shows on every tool it forces.
        forced = next((t for t in self.status.tools if t.mode_source == "global"), None)
        until = _until(forced) if forced is not None else ""
        self.push_screen(ModeDialog("", current, "global override", self.api.preview, until), self._change_mode)

    async def _change_mode(self, request: admin_pb2.SetModeRequest | None) -> None:
        if request is None:
            return
        try:
            answer = await self.api.change_override(request)
        except grpc.aio.AioRpcError as error:
            self.notify(
                f"{error.code().name}: {error.details()}", title="mode not changed", severity="error", timeout=10
            )
            return
        change = answer.change
        target = " ".join(part for part in (change.tool, change.check) if part) or "global override"
        self.notify(f"{target}: {change.old_mode or 'none'} -> {change.new_mode or 'none'} ({change.outcome})")
        if answer.durability_warning:  # in force, but a Redis failover now would undo it
            self.notify(answer.durability_warning, title="made, not yet safe", severity="warning", timeout=30)

    async def action_refresh_set(self) -> None:
        row = self.selected_row()
        if row is None or not row.value_set:
            self.notify("the selected row is not bound to a value set", severity="warning")
            return
        try:
            response = await self.api.refresh(row.value_set)
        except grpc.aio.AioRpcError as error:
            self.notify(f"{error.code().name}: {error.details()}", title="not refreshed", severity="error", timeout=10)
            return
        # What the refresh did, as the gateway saw it: a refused or oversized answer is not
        # "the source did not answer", and a confirmation is not a new version.
        title, severity = REFRESH_OUTCOMES.get(response.outcome, ("refreshed", "information"))
        self.notify(f"{response.value_set.name}: {response.detail}", title=title, severity=severity, timeout=10)


def _until(tool: admin_pb2.ToolStatus) -> str:
    """When the override in force on `tool` expires, in UTC; "" if never."""
    return f"{tool.mode_expires_at.ToDatetime():%Y-%m-%d %H:%M:%S} UTC" if tool.HasField("mode_expires_at") else ""
