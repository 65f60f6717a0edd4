"""Parses the durations policy files and flags use: 300, "300s", "5m", "1h", "250ms"."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds for a duration; raises ValueError saying what was expected."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 300, '30s', '5m' or '1h', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ValueError(f"expected a duration such as 300, '30s', '5m' or '1h', got {value!r}")
    if not seconds > 0:
        raise ValueError(f"expected a duration above zero, got {value!r}")
    return seconds
