"""The flip dialog's preview: the gateway's PreviewChange lines for the change as chosen, or why there are none.

The lines are the server's, shown as they are (one wording for the TUI, the
CLI and the docs). A change of choice blanks them at once, so a figure of
another change is never on screen, and an answer that arrives for a change no
longer chosen is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
from rich.text import Text
from textual import work
from textual.widgets import Static

from argwatch.v1 import admin_pb2

Fetch = Callable[[admin_pb2.SetModeRequest], Awaitable[admin_pb2.PreviewChangeResponse]]
SETTLE = 0.25  # seconds of quiet after a keystroke in the expiry field before asking: one call, not one a key
LOADING = "asking the gateway what this change would have done over the last 1 and 15 minutes..."


class PreviewPanel(Static):
    """Shows the preview of one change at a time."""

    def __init__(self, fetch: Fetch, id: str | None = None) -> None:
        super().__init__(id=id)
        self._fetch = fetch
        self._asked: admin_pb2.SetModeRequest | None = None
        self.lines: tuple[str, ...] = ()  # what the gateway answered for the change on screen, for tests

    def show_for(self, change: admin_pb2.SetModeRequest | None, hint: str = "") -> None:
        """Asks for the preview of `change` (None: nothing to preview yet, `hint` says what to choose)."""
        if change is not None and change == self._asked:
            return
        self._asked = change
        self.lines = ()
        if change is None:
            self.update(Text(hint, style="dim"))
            self.workers.cancel_group(self, "preview")
            return
        self.update(Text(LOADING, style="dim"))
        self._ask(change)

    @work(exclusive=True, group="preview")
    async def _ask(self, change: admin_pb2.SetModeRequest) -> None:
        await asyncio.sleep(SETTLE)  # cancelled by the next choice: typing an expiry asks once
        try:
            answer = await self._fetch(change)
        except grpc.aio.AioRpcError as error:
            if change == self._asked:
                self.update(Text(_why(error), style="bold"))
            return
        if change != self._asked:  # another change was chosen meanwhile: its own answer is on the way
            return
        self.lines = tuple(answer.lines)
        text = Text()
        for index, line in enumerate(answer.lines):
            text.append(("\n" if index else "") + line, style="bold" if index == 0 else "")
        self.update(text)


def _why(error: grpc.aio.AioRpcError) -> str:
    code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return "no preview: this gateway does not serve PreviewChange (a release before it)"
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return f"the gateway would refuse this change: {details}"
    return f"no preview: {code.name}: {details}"
