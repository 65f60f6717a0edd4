"""The mode-change dialog: what will change, a required reason, an optional expiry; focus starts on Cancel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static

from argwatch.common.durations import spoken
from argwatch.tui.blast_radius import impact
from argwatch.tui.expiry import parse_expiry
from argwatch.v1 import admin_pb2, gateway_pb2

CLEAR = "clear"
_CHOICES = {
    "observe": gateway_pb2.MODE_OBSERVE,
    "reject": gateway_pb2.MODE_REJECT,
    CLEAR: gateway_pb2.MODE_UNSPECIFIED,
}


class ModeRequest(NamedTuple):
    """A mode change the on-call confirmed."""

    tool: str  # "" for the global override
    mode: gateway_pb2.Mode  # MODE_UNSPECIFIED clears the override
    reason: str
    expires_in_seconds: int


class ModeDialog(ModalScreen[ModeRequest | None]):
    """Asks before changing a tool's mode (or the global override)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    ModeDialog { align: center middle; }
    ModeDialog > Vertical { width: 76; height: auto; border: thick $warning; padding: 1 2; background: $surface; }
    ModeDialog Static { width: 100%; }
    ModeDialog #preview { margin: 1 0; }
    ModeDialog Horizontal { height: auto; align-horizontal: right; }
    ModeDialog Button { margin-left: 2; }
    """

    def __init__(
        self,
        tool: str,
        current: str,
        source: str,
        until: str = "",
        policy_mode: str = "",
        tools: Sequence[admin_pb2.ToolStatus] = (),
    ) -> None:
        """`current` is the mode in force ("observe", "reject", or "none" for an unset global override);
        `source` where it comes from ("policy", "override", "global"); `until` when that override expires;
        `policy_mode` the tool's own mode in the policy, what a clear goes back to ("" if unknown)."""
        super().__init__()
        self._tool = tool
        self._current = current
        self._source = source
        self._until = until
        self._policy_mode = policy_mode
        self._tools = list(tools)  # the tools the change reaches, with their figures: its blast radius

    def compose(self) -> ComposeResult:
        title = f"Change the mode of tool {self._tool}" if self._tool else "Set the global override (forces every tool)"
        # Under an override, undoing it is the likely wish; otherwise, the other mode. The global override
        # preselects nothing: either way it changes every tool, and reject is the riskier direction.
        default: str | object = (
            CLEAR
            if self._source in ("override", "global override") and self._current != "none"
            else ("observe" if self._current == "reject" else "reject")
        )
        if not self._tool:
            default = Select.NULL
        clear = "clear the override (back to the policy)" if self._tool else "clear the global override"
        with Vertical():
            yield Static(Text(title, style="bold"), id="title")
            until = f", until {self._until}" if self._until else ""
            if self._tool or self._current != "none":
                now = f"now: {self._current} (from the {self._source}{until})"
            else:
                now = "now: no global override (each tool runs in its own mode)"
            yield Static(Text(now), id="now")
            yield Select(
                [
                    ("observe: let calls through, record", "observe"),
                    ("reject: refuse bad calls", "reject"),
                    (clear, CLEAR),
                ],
                value=default,
                allow_blank=not self._tool,
                prompt="choose: observe, reject, or clear",
                id="mode",
            )
            yield Input(placeholder="reason (required): incident id, what you saw", id="reason")
            yield Input(placeholder="expires after (optional): 30m, 2h, 1h30m", id="expiry")
            yield Static(id="preview")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Apply", id="apply", variant="warning")

    def on_mount(self) -> None:
        self._preview()
        self.query_one("#cancel", Button).focus()

    @on(Select.Changed)
    @on(Input.Changed)
    def _changed(self) -> None:
        # A clear has nothing to expire: the field goes, and what was typed in it is not sent.
        self.query_one("#expiry", Input).display = self._choice() != CLEAR
        self._preview()

    def _choice(self) -> str:
        value = self.query_one("#mode", Select).value
        return "" if value is Select.NULL else str(value)

    def _request(self) -> ModeRequest:
        """The change as typed; ValueError says what is missing or wrong (and _problem_field where)."""
        choice = self._choice()
        reason = self.query_one("#reason", Input).value.strip()
        if not choice:
            raise ValueError("choose a mode: observe, reject, or clear")
        if not reason:
            raise ValueError("a reason is required (it goes to the audit trail)")
        expires = 0 if choice == CLEAR else parse_expiry(self.query_one("#expiry", Input).value)
        return ModeRequest(self._tool, _CHOICES[choice], reason, expires)

    def _problem_field(self) -> str:
        """The field to fix first: the mode, the reason, else the expiry."""
        if not self._choice():
            return "#mode"
        return "#reason" if not self.query_one("#reason", Input).value.strip() else "#expiry"

    def _preview(self) -> None:
        choice = self._choice()
        who = self._tool or "every tool"
        if choice == CLEAR and self._tool:
            after = f"{self._policy_mode}, the policy's mode" if self._policy_mode else "the policy's mode"
        elif choice == CLEAR:
            after = "each tool's own mode (its override, else the policy's)"
        else:
            after = choice or "?"
        line = f"will change: {who}: {self._current} -> {after}"
        # The blast radius shows as soon as a mode is chosen, before the reason is typed.
        target = self._policy_mode if choice == CLEAR and self._tool else choice
        effect = impact(self._tools, target) if target in ("observe", "reject") else []
        preview = self.query_one("#preview", Static)
        try:
            request = self._request()
        except ValueError as problem:
            preview.update(Text.assemble(line, *(f"\n{said}" for said in effect), "\n", (f"! {problem}", "bold")))
            return
        until = (
            f", reverting by itself after {spoken(request.expires_in_seconds)}" if request.expires_in_seconds else ""
        )
        text = Text(f"{line}{until}")
        for said in effect:
            text.append(f"\n{said}")
        text.append(f"\nreason: {request.reason}")
        if self._tool and self._source == "global":
            text.append("\n! the global override wins: this takes effect once it is cleared", style="bold")
        preview.update(text)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#apply")
    def _apply(self) -> None:
        try:
            request = self._request()
        except ValueError:
            self._preview()
            self.query_one(self._problem_field()).focus()  # where the fix goes, not wherever Tab left it
            return
        self.dismiss(request)
