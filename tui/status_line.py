"""`argwatch watch`: a live one-line status of a gateway from its Admin API (and `make run` without a terminal)."""

from __future__ import annotations

import asyncio
import sys

import grpc

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.v1 import admin_pb2, gateway_pb2

_MODE = {gateway_pb2.MODE_OBSERVE: "obs", gateway_pb2.MODE_REJECT: "REJ", gateway_pb2.MODE_UNSPECIFIED: "-"}


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def render(status: admin_pb2.GetStatusResponse, previous: admin_pb2.GetStatusResponse | None) -> str:
    """One line: calls/s, then per tool its mode, calls, out-of-set rate as written/after normalisation,
    rejections and checks failed open (shown even at 0: a check that stopped checking must be visible)."""
    parts = []
    for tool in status.tools:
        if tool.tool == "_unknown":
            if tool.calls:
                parts.append(f"unknown tools {tool.calls}")
            continue
        parts.append(
            f"{tool.tool} {_MODE.get(tool.mode, '?')} {tool.calls} "
            f"oos {_rate(tool.out_of_set, tool.value_checks)}/{_rate(tool.out_of_set_normalised, tool.value_checks)} "
            f"rej {tool.rejected} open {tool.unavailable}"
        )
    down = [s.name for s in status.value_sets if not s.available]
    rate = ""
    if previous is not None:
        seconds = (status.taken_at.ToNanoseconds() - previous.taken_at.ToNanoseconds()) / 1e9
        calls = sum(t.calls for t in status.tools) - sum(t.calls for t in previous.tools)
        rate = f"{calls / seconds:.0f}/s | " if seconds > 0 else ""
    sets = f" | SETS DOWN: {', '.join(down)}" if down else ""
    return f"{rate}" + " | ".join(parts) + sets


# Refusals that no amount of waiting cures: watch stops at once and exits 1 (a gateway that is
# restarting, UNAVAILABLE, is shown and retried every interval instead).
_FATAL = {
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INVALID_ARGUMENT,
}


async def watch_status(connection: Connection, interval: float, count: int) -> int:
    """Prints a status line every `interval` seconds (overwriting on a terminal) until interrupted or `count`.

    Exit status: 1 when the Admin API refused us (a bad or missing token, say), or the last attempt failed."""
    target = connection.target
    client = AdminClient(connection)
    previous = None
    printed = 0
    failed = False
    overwrite = sys.stdout.isatty()
    try:
        while count == 0 or printed < count:
            try:
                status = await client.status()
                line = render(status, previous)
                previous, failed = status, False
            except grpc.aio.AioRpcError as error:
                if error.code() in _FATAL:
                    print(f"argwatch watch: {target}: {error.code().name}: {error.details()}", file=sys.stderr)
                    return 1
                line = f"admin API at {target}: {error.code().name}: {error.details()}"
                failed = True
            if overwrite:
                sys.stdout.write("\r\x1b[2K" + line[: _width()])
            else:
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
            printed += 1
            if count == 0 or printed < count:
                await asyncio.sleep(interval)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        if overwrite:
            sys.stdout.write("\n")
        await client.close()
    return 1 if failed else 0


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((160, 24)).columns
