"""The top area's source lines: each source that is down, with its address and error, what it serves and the
tools that touches, so on-call reads what to restore rather than the stale sets that follow from it."""

from __future__ import annotations

import re

from argwatch.v1 import admin_pb2

NAMES_SHOWN = 4  # sets, record kinds or tools listed on a line before "+N"
_CODE = re.compile(r"\b([A-Z][A-Z_]{3,}): ")


def short_error(error: str) -> str:
    """A transport error as on-call needs it: its status code and its last cause ("UNAVAILABLE: Connection
    refused" for gRPC's "...: UNAVAILABLE: failed to connect to all addresses; last error: ...: Connection
    refused"); an error without a code as it is."""
    found = _CODE.search(error)
    cause = error.rsplit(": ", 1)[-1].strip()
    if found is None:
        return error
    return f"{found.group(1)}: {cause}" if cause != found.group(1) else found.group(1)


def _names(label: str, names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    more = f" +{len(names) - NAMES_SHOWN}" if len(names) > NAMES_SHOWN else ""
    return f"{label} {shown}{more}" if names else ""


def down_sources(status: admin_pb2.GetStatusResponse) -> dict[str, list[admin_pb2.SourceStatus]]:
    """The sources with a connection down, by name: each one's entries (value sets, records), all of them."""
    entries: dict[str, list[admin_pb2.SourceStatus]] = {}
    for source in status.sources:
        entries.setdefault(source.name, []).append(source)
    return {name: found for name, found in entries.items() if not all(entry.connected for entry in found)}


def source_lines(status: admin_pb2.GetStatusResponse) -> list[str]:
    """One line per source down: "SOURCE DOWN owners 127.0.0.1:50061: UNAVAILABLE: Connection refused ·
    sets ... · records order · tools refund_order, ..."; none while every source answers."""
    lines = []
    for name, entries in down_sources(status).items():
        down = [entry for entry in entries if not entry.connected]
        error = next((entry.last_transport_error for entry in down if entry.last_transport_error), "")
        which = "" if len(down) == len(entries) else f" ({'look-ups' if down[0].kind == 'records' else 'sets'})"
        head = f"SOURCE DOWN {name}{which} {entries[0].address}" + (f": {short_error(error)}" if error else "")
        tools = list(dict.fromkeys(tool for entry in entries for tool in entry.tools))
        parts = [
            head,
            _names("sets", [s for entry in entries for s in entry.value_sets]),
            _names("records", [k for entry in entries for k in entry.record_kinds]),
            _names("tools", tools),
        ]
        lines.append(" · ".join(part for part in parts if part))
    return lines
