"""The one duration grammar, shared by policy files, flags and the TUI: 300, "90s", "250ms", "5m", "1h30m", "2d".

A bare number is seconds; otherwise one or more parts of a number and a unit
(ms, s, m, h, d), as Go's time.ParseDuration and Prometheus write them. Both
the gateway and the TUI read it from here, so `--window 1h30m` and a policy's
`ttl: 250ms` can never mean different things in two places.
"""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPOKEN_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
EXAMPLES = "300, '30s', '250ms', '5m' or '1h30m'"


def parse_duration(value: object) -> float:
    """Seconds (above zero) for a duration; ValueError says what was expected."""
    if isinstance(value, bool):  # YAML's `yes` must not read as one second
        raise ValueError(f"expected a duration such as {EXAMPLES}, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (parsed := _seconds_of(value)) is not None:
        seconds = parsed
    else:
        raise ValueError(f"expected a duration such as {EXAMPLES}, got {value!r}")
    if not seconds > 0:
        raise ValueError(f"expected a duration above zero, got {value!r}")
    return seconds


def duration(text: str) -> float:
    """parse_duration for argparse's `type=` (its name is what argparse says was invalid)."""
    return parse_duration(text)


def _seconds_of(text: str) -> float | None:
    text = text.strip().lower()
    if _NUMBER.fullmatch(text):
        return float(text)
    total, position = 0.0, 0
    for match in _PART.finditer(text):
        if text[position : match.start()].strip():
            return None  # something that is not a part stands between two parts
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position == 0 or text[position:].strip():
        return None
    return total


def spoken(seconds: float) -> str:
    """90 -> "1m30s", 7200 -> "2h", 0.25 -> "250ms": a duration as a person writes it (and as it parses back)."""
    if 0 < seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = int(seconds)
    parts = []
    for unit, size in _SPOKEN_UNITS:
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts) or "0s"
