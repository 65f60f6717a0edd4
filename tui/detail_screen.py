"""The detail view of one row: trend over the hour, figures per window, top offenders, shapes, the set's state."""

from __future__ import annotations

from typing import ClassVar

import grpc
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Sparkline, Static

from argwatch.tui.admin_client import AdminApi
from argwatch.tui.offender_verdict import offender_verdict
from argwatch.tui.status_view import (
    CAUSE_WORDS,
    NO_ARGUMENT,
    WINDOW_NAMES,
    WINDOWS,
    age_text,
    mode_cell,
    per_second,
    percent,
    repair_text,
    window_of,
)
from argwatch.tui.tool_signals import failure_targets_of
from argwatch.v1 import admin_pb2

OFFENDERS_SHOWN = 10
SIDE_REFRESH_SECONDS = 5.0  # offenders and shapes: asked for again this often while the view is open


class DetailScreen(Screen[None]):
    """One tool and argument, kept live from the main feed; offenders and shapes asked for separately."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    DetailScreen Static { margin: 0 1; }
    DetailScreen .heading { text-style: bold; margin-top: 1; }
    DetailScreen Sparkline { height: 3; width: 62; margin: 0 1; }
    DetailScreen #title { text-style: bold; background: $boost; }
    """

    def __init__(self, api: AdminApi, tool: str, argument: str, live_side: bool = True) -> None:
        super().__init__()
        self.api = api
        self.tool = tool
        self.argument = argument
        self._live_side = live_side

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="title")
            yield Static(id="overrides")  # below the tool: a check's mode, a source's failure; hidden when none
            yield Static("Out-of-set values per minute, last hour", id="trend-oos-title", classes="heading")
            yield Sparkline([], id="trend-oos")
            yield Static("Values checked per minute", id="trend-checks-title", classes="heading")
            yield Sparkline([], id="trend-checks")
            yield Static(id="figures")
            # Only where the policy declares models: the same value checks, one row per model and prompt version.
            yield Static("Out of set by model and prompt version", id="by-model-title", classes="heading")
            yield Static(id="by-model")
            # Since start, and every problem that carries a value (out of set, wrong type, out of range): not
            # the out-of-set count of a window, which the figures above give.
            yield Static("Top offending values since start (any problem with a value)", classes="heading")
            yield Static("asking the gateway...", id="offenders")
            yield Static("Why values missed, by shape (out-of-set values, last hour)", classes="heading")
            yield Static("asking the gateway...", id="shapes")
            yield Static("Value set", classes="heading")
            yield Static(id="value-set")
        yield Footer(compact=True, show_command_palette=False)

    async def on_mount(self) -> None:
        await self.refresh_side()
        if self._live_side:
            self.set_interval(SIDE_REFRESH_SECONDS, self.refresh_side)

    def show(self, status: admin_pb2.GetStatusResponse) -> None:
        """Updates the live parts from a new snapshot."""
        tool = next((t for t in status.tools if t.tool == self.tool), None)
        argument = next((a for a in status.arguments if (a.tool, a.argument) == (self.tool, self.argument)), None)
        if tool is None:
            if status.tools_matched > len(status.tools):  # the gateway sent only the tools most in need
                gone = "not among the tools the gateway sends now: filter by its name (/) to follow it"
            else:
                gone = "no longer in the gateway's policy"
            self.query_one("#title", Static).update(Text(f"{self.tool}: {gone}"))
            return
        value_set_name = argument.value_set if argument is not None else ""
        failures = failure_targets_of(tool, status.failure_overrides, status.sources)
        title = f"{self.tool} . {self.argument}   mode {mode_cell(tool, failures=failures)}"
        if tool.HasField("mode_expires_at"):
            title += f" until {tool.mode_expires_at.ToDatetime():%Y-%m-%d %H:%M:%S} UTC"
        if value_set_name:
            title += f"   set {value_set_name}"
        self.query_one("#title", Static).update(Text(title))
        overrides = _overrides_text(tool, failures)
        self.query_one("#overrides", Static).display = bool(overrides)
        self.query_one("#overrides", Static).update(Text(overrides))
        misses = list(argument.out_of_set_per_minute) if argument is not None else []
        checked = list(argument.checks_per_minute) if argument is not None else list(tool.calls_per_minute)
        self.query_one("#trend-oos", Sparkline).data = [float(v) for v in misses]
        self.query_one("#trend-checks", Sparkline).data = [float(v) for v in checked]
        self.query_one("#trend-oos-title", Static).update(
            f"Out-of-set values per minute, last hour, oldest left ({_range(misses)})"
        )
        self.query_one("#trend-checks-title", Static).update(
            f"{'Values checked' if argument is not None else 'Calls'} per minute ({_range(checked)})"
        )
        self.query_one("#figures", Static).update(_figures_table(tool, argument))
        if argument is not None:  # the same snapshot as the figures: the 1h row's out-of-set values, by shape
            self.query_one("#shapes", Static).update(_shapes_text(window_of(argument, 3600)))
        value_set = next((s for s in status.value_sets if s.name == value_set_name), None)
        self.query_one("#value-set", Static).update(_value_set_text(value_set, tool, self.argument))

    async def refresh_side(self) -> None:
        """Asks for the offenders and the shape breakdown (they are not in the status stream)."""
        offenders, shapes = self.query_one("#offenders", Static), self.query_one("#shapes", Static)
        if self.argument == NO_ARGUMENT:
            offenders.update("no argument of this tool is checked")
            shapes.update("-")
            return
        await self._refresh_cohorts()
        try:
            samples = await self.api.samples(self.tool, self.argument, OFFENDERS_SHOWN)
        except grpc.aio.AioRpcError as error:
            offenders.update(Text(f"! the gateway did not answer: {error.code().name}: {error.details()}"))
            return
        offenders.update(_offenders_text(samples))

    async def _refresh_cohorts(self) -> None:
        """Each model and prompt version's rates (Admin.GetCohorts), shown only where the policy declares models."""
        try:
            cohorts = await self.api.cohorts(self.tool, self.argument)
        except grpc.aio.AioRpcError:
            cohorts = []  # an older gateway without the call, or one not answering: the rest of the view says so
        for part in ("#by-model-title", "#by-model"):
            self.query_one(part, Static).display = bool(cohorts)
        if cohorts:
            self.query_one("#by-model", Static).update(_cohorts_table(cohorts))


def _overrides_text(tool: admin_pb2.ToolStatus, failures: list[admin_pb2.FailureOverride]) -> str:
    """Each override below the tool, one a line, with who set it, why and until when."""
    lines = [
        f"check {c.name} in {c.override_mode}{_by(c.override_actor, c.override_reason, c, 'override_expires_at')}"
        for c in tool.checks
        if c.override_mode
    ]
    lines += [f"{f.target} fails {f.failure}{_by(f.actor, f.reason, f, 'expires_at')}" for f in failures]
    return "Overrides below the tool:\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


def _by(actor: str, reason: str, message: admin_pb2.CheckPolicy | admin_pb2.FailureOverride, expiry: str) -> str:
    until = f"{getattr(message, expiry).ToDatetime():%Y-%m-%d %H:%M:%S} UTC" if message.HasField(expiry) else "never"
    return f", by {actor} ({reason}), until {until}"


def _range(values: list[int]) -> str:
    """The scale of a sparkline (it stretches lowest to highest, so small wobbles look tall)."""
    if not values:
        return "no data"
    # Calendar minutes: the last one is still filling, so it is said so (the 1m row above is the last 60 s).
    return f"low {min(values)}, peak {max(values)}, this minute so far {values[-1]}"


def _figures_table(tool: admin_pb2.ToolStatus, argument: admin_pb2.ArgumentStatus | None) -> Table:
    """The figures of the three windows, one column per window and one row per figure: it stays whole at 80
    columns (a column per figure, cut to fit, read "win… cal… 114…"), and each problem code gets its row."""
    table = Table(box=None, padding=(0, 1), show_edge=False)
    table.add_column("figure", overflow="fold")
    for seconds in WINDOWS:
        table.add_column(WINDOW_NAMES[seconds], justify="right", overflow="fold")
    tools = [window_of(tool, seconds) for seconds in WINDOWS]
    rows = [window_of(argument, seconds) for seconds in WINDOWS] if argument is not None else tools
    lines: list[tuple[str, list[str]]] = [
        ("calls/s", [per_second(f.per_second) for f in tools]),
        ("checks", [str(f.value_checks) for f in rows]),
        ("oos%", [percent(f.out_of_set, f.value_checks) for f in rows]),
        ("norm%", [percent(f.out_of_set_normalised, f.value_checks) for f in rows]),
        ("rejected", [str(f.rejected) for f in tools]),
        ("rejected %", [percent(f.rejected, f.calls) for f in tools]),  # the share MODE says "refusing" now
        ("repair succeeded/abandoned/open", [repair_text(f) for f in tools]),  # as the main table's REPAIR
    ]
    if tool.side_effect:  # calls that repeated an operation that may already have happened
        lines.append(("repeats", [str(f.repeats) for f in tools]))
    lines.append(("fail-open", [str(f.failed_open) for f in rows]))
    codes = sorted({code for f in rows for code in f.problems})
    lines.extend((f"problem {code}", [str(f.problems.get(code, 0)) for f in rows]) for code in codes)
    if not codes:
        lines.append(("problems", ["-"] * len(WINDOWS)))
    for label, cells in lines:
        table.add_row(label, *cells)
    return table


def _cohorts_table(cohorts: list[admin_pb2.CohortFigures]) -> Table:
    """Each model and prompt version's out-of-set rate per window, side by side ("_other": a model or version
    the policy does not declare; "_none": calls that named none)."""
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("model")
    table.add_column("prompt")
    for seconds in WINDOWS:
        table.add_column(f"{WINDOW_NAMES[seconds]} oos% (checks)", justify="right")
    for cohort in cohorts:
        cells = []
        for seconds in WINDOWS:
            figures = window_of(cohort, seconds)
            cells.append(f"{percent(figures.out_of_set, figures.value_checks)} ({figures.value_checks})")
        table.add_row(cohort.model, cohort.prompt_version, *cells)
    return table


def _offenders_text(samples: admin_pb2.ListSamplesResponse) -> Text:
    if not samples.total:
        return Text("none seen")
    text = Text(offender_verdict(samples) + "\n", style="bold" if samples.clustered else "")
    for value in samples.values:
        text.append(f"  {value.count:>7}  {value.value}  {value.shape or '-'}\n")
    return text


def _shapes_text(figures: admin_pb2.WindowFigures) -> Text:
    """The 1h row's out-of-set values by shape, from the same snapshot as the figures table (the shape
    report, asked for at another moment, put two hours' counts side by side)."""
    if not figures.out_of_set:
        return Text("no out-of-set values in the last hour")
    counts = sorted(figures.shapes.items(), key=lambda item: -item[1])
    shares = ", ".join(f"{shape} {100 * count / figures.out_of_set:.0f}% ({count})" for shape, count in counts if count)
    return Text(f"of the {figures.out_of_set} out-of-set values in the 1h row: {shares or 'no shape known'}")


def _value_set_text(value_set: admin_pb2.ValueSetStatus | None, tool: admin_pb2.ToolStatus, argument: str) -> Text:
    checks = [check for check in tool.checks if check.argument == argument]
    policy = ", ".join(f"{c.check}: fails {'CLOSED' if c.fails_closed else 'open'}" for c in checks) or "no checks"
    if value_set is None:
        return Text(f"not bound to a value set ({policy})")
    state = []
    if not value_set.available:
        state.append("NOT AVAILABLE: checks are skipped")
    elif value_set.stale:
        state.append("STALE")
    state.append("source connected" if value_set.source_connected else "SOURCE DOWN")
    text = Text(
        f"{value_set.name} from {value_set.source}: version {value_set.version}, {value_set.members} members, "
        f"confirmed {age_text(value_set.age_seconds)} ago; {'; '.join(state)}\n{policy}"
    )
    if value_set.last_error:
        cause = CAUSE_WORDS.get(value_set.stale_cause, "stale")
        text.append(f"\nwhy not fresh ({cause}): {value_set.last_error}")
    if value_set.last_refused_reason:
        when = value_set.last_refused_at.ToDatetime()
        text.append(f"\nlast refused update: {value_set.last_refused_reason} at {when:%Y-%m-%d %H:%M:%S} UTC")
    if value_set.last_transport_error:
        when = value_set.last_transport_error_at.ToDatetime()
        over = "over: the source is connected" if value_set.source_connected else "ongoing"
        text.append(
            f"\nlast transport error ({over}): {value_set.last_transport_error} at {when:%Y-%m-%d %H:%M:%S} UTC"
        )
    return text
