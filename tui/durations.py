"""Durations typed by a person in the TUI ("30m", "1h30m", "90s", "45"), as whole seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+)\s*([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SECONDS = 7 * 86400


def parse_expiry(text: str) -> int:
    """Seconds from text like "30m" or "1h30m"; "" is 0 (no expiry). ValueError says what is accepted."""
    text = text.strip().lower()
    if not text:
        return 0
    position, total = 0, 0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        total += int(match.group(1)) * _UNIT[match.group(2)]
        position = match.end()
    if position != len(text) or total <= 0:
        raise ValueError(f"expiry {text!r}: use a duration like 90s, 30m, 2h or 1h30m")
    if total > MAX_SECONDS:
        raise ValueError(f"expiry {text!r}: at most 7 days (an incident override should not outlive the incident)")
    return total


def spoken(seconds: int) -> str:
    """90 -> "1m30s", 7200 -> "2h": how a person would say a duration."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"
