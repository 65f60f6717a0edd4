"""An override's expiry as the on-call types it in the mode dialog ("30m", "1h30m"): whole seconds, at most 7 days."""

from __future__ import annotations

from argwatch.common.durations import parse_duration

MAX_SECONDS = 7 * 86400


def parse_expiry(text: str) -> int:
    """Seconds from text like "30m" or "1h30m"; "" is 0 (no expiry). ValueError says what is accepted."""
    text = text.strip()
    if not text:
        return 0
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise ValueError(f"expiry {text!r}: use a duration like 90s, 30m, 2h or 1h30m") from None
    if seconds > MAX_SECONDS:
        raise ValueError(f"expiry {text!r}: at most 7 days (an incident override should not outlive the incident)")
    return max(1, round(seconds))
