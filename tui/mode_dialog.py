"""The flip dialog: what to act on (the tool, one check, a source or set), the mode, a reason, an expiry, and
the gateway's preview of what it would have done; focus starts on Cancel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static

from argwatch.tui.expiry import parse_expiry
from argwatch.tui.flip_targets import WHOLE_TOOL, FlipTarget
from argwatch.tui.preview_panel import Fetch, PreviewPanel
from argwatch.v1 import admin_pb2, gateway_pb2

CLEAR = "clear"
_MODES = {"observe": gateway_pb2.MODE_OBSERVE, "reject": gateway_pb2.MODE_REJECT, CLEAR: gateway_pb2.MODE_UNSPECIFIED}
_FAILURES = {"open": "open", "closed": "closed", CLEAR: ""}


class ModeDialog(ModalScreen[admin_pb2.SetModeRequest | None]):
    """Asks before changing a mode (a tool's, a check's, the global override) or a source's failure."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    # The preview has a fixed share of the height (40%), scrolling within it: its answer arriving moves no
    # button from under the pointer, and at 80x24 the whole dialog, buttons and two problem lines included,
    # fits (23 rows). Compact fields for the same reason.
    DEFAULT_CSS = """
    ModeDialog { align: center middle; }
    ModeDialog > Vertical {
        width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: thick $warning; padding: 0 1; background: $surface;
    }
    ModeDialog > Vertical > Static { width: 100%; }
    ModeDialog #now { margin-bottom: 1; }
    ModeDialog #problem { height: auto; }
    ModeDialog #preview-box { height: 40vh; margin: 1 0 0 0; }
    ModeDialog #buttons { height: auto; align-horizontal: right; margin-top: 1; }
    ModeDialog Button { margin-left: 2; }
    """

    def __init__(
        self,
        tool: str,
        current: str,
        source: str,
        fetch: Fetch,
        until: str = "",
        policy_mode: str = "",
        targets: Sequence[FlipTarget] = (),
    ) -> None:
        """`current` is the tool's mode in force ("observe", "reject", or "none" for an unset global override);
        `source` where it comes from ("policy", "override", "global"); `until` when that override expires;
        `policy_mode` the tool's own mode in the policy; `targets` what else of the tool a flip can act on
        (flip_targets); `fetch` asks the gateway for a preview (AdminApi.preview)."""
        super().__init__()
        self._tool = tool
        self._current = current
        self._source = source
        self._until = until
        self._policy_mode = policy_mode
        self._targets = {target.check: target for target in targets} if tool else {}
        self._fetch = fetch

    def compose(self) -> ComposeResult:
        title = f"Change the mode of tool {self._tool}" if self._tool else "Set the global override (forces every tool)"
        with Vertical():
            yield Static(Text(title, style="bold"), id="title")
            yield Static(id="now")
            if len(self._targets) > 1:
                yield Select(
                    [(target.label, check) for check, target in self._targets.items()],
                    value=WHOLE_TOOL,
                    allow_blank=False,
                    compact=True,
                    id="target",
                )
            yield Select(self._options(), value=self._default(), allow_blank=not self._tool, compact=True, id="mode")
            yield Input(placeholder="reason (required): incident id, what you saw", compact=True, id="reason")
            yield Input(placeholder="expires after (optional): 30m, 2h, 1h30m", compact=True, id="expiry")
            yield Static(id="problem")
            with VerticalScroll(id="preview-box"):
                yield PreviewPanel(self._fetch, id="preview")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Apply", id="apply", variant="warning", compact=True)

    def on_mount(self) -> None:
        self._show()
        self.query_one("#cancel", Button).focus()

    def _target(self) -> FlipTarget | None:
        """The check or failure target chosen; None for the whole tool (or the global override)."""
        if not self.is_mounted or not self.query("#target"):
            return None
        chosen = self.query_one("#target", Select).value
        return None if chosen in (WHOLE_TOOL, Select.NULL) else self._targets.get(str(chosen))

    def _options(self, target: FlipTarget | None = None) -> list[tuple[str, str]]:
        if target is not None and target.failure:
            return [
                ("open: let calls through while it cannot be read (skipped, counted)", "open"),
                ("closed: refuse calls while it cannot be read", "closed"),
                ("clear the failure override (back to the policy's)", CLEAR),
            ]
        if target is not None:
            clear = "clear the check's override (back to the tool's mode)"
        else:
            clear = "clear the override (back to the policy)" if self._tool else "clear the global override"
        return [
            ("observe: let calls through, record", "observe"),
            ("reject: refuse bad calls", "reject"),
            (clear, CLEAR),
        ]

    def _default(self, target: FlipTarget | None = None) -> str | object:
        """Under an override, undoing it is the likely wish; otherwise the other mode (a source: fail open).
        The global override preselects nothing: it changes every tool, and reject is the riskier direction."""
        if not self._tool:
            return Select.NULL
        if target is not None:
            overridden = target.now.startswith(("fails ", "observe (override", "reject (override"))
            return CLEAR if overridden else ("open" if target.failure else self._other())
        return CLEAR if self._source in ("override", "global override") and self._current != "none" else self._other()

    def _other(self) -> str:
        return "observe" if self._current == "reject" else "reject"

    @on(Select.Changed, "#target")
    def _target_changed(self) -> None:
        target = self._target()
        mode = self.query_one("#mode", Select)
        mode.set_options(self._options(target))
        mode.value = self._default(target)
        self._show()

    @on(Select.Changed, "#mode")
    @on(Input.Changed)
    def _changed(self) -> None:
        self._show()

    def _choice(self) -> str:
        value = self.query_one("#mode", Select).value
        return "" if value is Select.NULL else str(value)

    def _change(self, reason: str, expires: int) -> admin_pb2.SetModeRequest:
        """The change chosen, as SetMode takes it: what is previewed is what Apply sends."""
        choice, target = self._choice(), self._target()
        if target is not None and target.failure:
            return admin_pb2.SetModeRequest(
                check=target.check, failure=_FAILURES[choice], reason=reason, expires_in_seconds=expires
            )
        check = target.check if target is not None else ""
        return admin_pb2.SetModeRequest(
            tool=self._tool, check=check, mode=_MODES[choice], reason=reason, expires_in_seconds=expires
        )

    def _request(self) -> admin_pb2.SetModeRequest:
        """The change as typed; ValueError says what is missing or wrong (and _problem_field where)."""
        reason = self.query_one("#reason", Input).value.strip()
        if not self._choice():
            raise ValueError("choose a mode: observe, reject, or clear")
        if not reason:
            raise ValueError("a reason is required (it goes to the audit trail)")
        expires = 0 if self._choice() == CLEAR else parse_expiry(self.query_one("#expiry", Input).value)
        return self._change(reason, expires)

    def _problem_field(self) -> str:
        """The field to fix first: the mode, the reason, else the expiry."""
        if not self._choice():
            return "#mode"
        return "#reason" if not self.query_one("#reason", Input).value.strip() else "#expiry"

    def _show(self) -> None:
        """The line of what is in force, what to fix, and the preview of the change chosen."""
        target, choice = self._target(), self._choice()
        # A clear has nothing to expire: the field goes, and what was typed in it is not sent.
        self.query_one("#expiry", Input).display = choice != CLEAR
        until = f", until {self._until}" if self._until else ""
        if target is not None:
            now = f"now: {target.check}: {target.now}"
        elif self._tool or self._current != "none":
            now = f"now: {self._current} (from the {self._source}{until})"
        else:
            now = "now: no global override (each tool runs in its own mode)"
        self.query_one("#now", Static).update(Text(now))
        problems = []
        try:
            self._request()
        except ValueError as problem:
            problems.append(f"! {problem}")
        if self._tool and target is None and self._source == "global":
            problems.append("! the global override wins: this takes effect once it is cleared")
        self.query_one("#problem", Static).update(Text("\n".join(problems), style="bold"))
        preview = self.query_one("#preview", PreviewPanel)
        if not choice:
            preview.show_for(None, "choose a mode to see what it would have done")
            return
        try:
            expires = 0 if choice == CLEAR else parse_expiry(self.query_one("#expiry", Input).value)
        except ValueError:
            expires = 0  # the problem line says what is wrong; the preview is of the change without it
        preview.show_for(self._change("", expires))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#apply")
    def _apply(self) -> None:
        try:
            request = self._request()
        except ValueError:
            self._show()
            self.query_one(self._problem_field()).focus()  # where the fix goes, not wherever Tab left it
            return
        self.dismiss(request)
