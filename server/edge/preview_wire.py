"""Admin.PreviewChange's answer on the wire: a modes/preview.Preview, with its lines in on-call's words."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from argwatch.server.modes.preview import MAX_TOOLS_LISTED, Preview, WindowPreview
from argwatch.server.modes.preview_text import change_text, lines
from argwatch.v1 import admin_pb2


def preview_to_wire(preview: Preview) -> admin_pb2.PreviewChangeResponse:
    # Most affected first: by the calls changed over the shortest window, then the longest.
    ranked = sorted(
        preview.by_tool.items(),
        key=lambda item: tuple(-(w.newly_allowed + w.newly_refused) for w in item[1]),
    )
    return admin_pb2.PreviewChangeResponse(
        change=change_text(preview),
        windows=[_window(window) for window in preview.windows],
        tools=[
            admin_pb2.ToolPreview(tool=tool, windows=[_window(window) for window in windows])
            for tool, windows in ranked[:MAX_TOOLS_LISTED]
        ],
        tools_left_off=max(0, len(ranked) - MAX_TOOLS_LISTED),
        switched_off=[
            admin_pb2.Protection(kind=p.kind, security=p.security, tool=p.tool, check=p.check, text=p.text)
            for p in preview.protections
        ],
        switched_off_left_off=preview.protections_left_off,
        lines=lines(preview),
        changes_anything=preview.changes_anything,
    )


def _window(window: WindowPreview) -> admin_pb2.PreviewWindow:
    return admin_pb2.PreviewWindow(
        window_seconds=window.window_seconds,
        covered_seconds=window.covered_seconds,
        calls=window.calls,
        refused_now=window.refused_now,
        newly_allowed=window.newly_allowed,
        newly_allowed_by_cause=_causes(window.newly_allowed_by_cause),
        newly_refused=window.newly_refused,
        newly_refused_by_cause=_causes(window.newly_refused_by_cause),
        not_previewed=window.not_previewed,
    )


def _causes(by_cause: Mapping[str, int]) -> Iterable[admin_pb2.CauseCount]:
    ordered = sorted(by_cause.items(), key=lambda item: (-item[1], item[0]))
    return [admin_pb2.CauseCount(cause=cause, calls=calls) for cause, calls in ordered]
