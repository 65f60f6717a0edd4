"""The Admin API's windows as the TUI names them, and one row's figures over one of them."""

from __future__ import annotations

from argwatch.v1 import admin_pb2

WINDOWS = (60, 900, 3600)
WINDOW_NAMES = {60: "1m", 900: "15m", 3600: "1h"}


def window_of(
    row: admin_pb2.ToolStatus | admin_pb2.ArgumentStatus | admin_pb2.CohortFigures, seconds: int
) -> admin_pb2.WindowFigures:
    for figures in row.windows:
        if figures.window_seconds == seconds:
            return figures
    return admin_pb2.WindowFigures(window_seconds=seconds)
