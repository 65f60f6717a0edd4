"""Timing figures live in docs/performance.md and the benches' output, never in the code's comments: they go stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# "~0.7 us", "2 µs", "~25 ms", "~0.5 s": a measured figure. A duration in the grammar ("250ms") or a
# setting ("at least 20 ms") has no tilde and no micro- or nanoseconds.
FIGURE = re.compile(r"\d[\d.,]*\s?(?:us|µs|ns)\b|~\s?\d[\d.,]*\s?(?:ms|s)\b")


def test_no_code_comment_or_docstring_carries_a_timing_figure() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("server", "client", "sources", "common", "tui")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if FIGURE.search(line)
    ]
    assert found == [], "move the figure to docs/performance.md (Design choices, measured)"
