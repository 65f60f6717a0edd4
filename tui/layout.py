"""Which columns of the main table fit the terminal, and cells that never cut a number into another number.

On-call may have 80 columns (a laptop split in two) or 200. The columns that
say what is wrong and where always show: the flag, tool, argument, mode, the
out-of-set rate and HEALTH. The others are added in order of use while they
fit whole; none is ever clipped at the screen's edge (at 120 columns a clipped
REPAIR read `97/0/2` for `97/0/2xx`, a plausible, wrong figure).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

# Every column's key, in the order they are shown when there is room for all.
ALWAYS = ("flag", "tool", "argument", "mode", "oos", "health")
# The other columns, most useful first: added while the width allows.
BY_USE = ("rate", "open", "age", "norm", "repair", "problems", "repeats", "spark")
CELL_PADDING = 2  # Textual's DataTable pads each cell by one on each side
HEALTH_MIN = 16  # the widest single flag ("FAIL-CLOSED 999k"): optional columns give way first
# Narrower still when long names leave no more at 80 columns: the first flag's word whole ("FAIL-CLOSED",
# "SRC-DOWN +2"), rather than a HEALTH cut at the screen's edge ("SRC-DOWN +2 mo").
HEALTH_FLOOR = 11
SHORT_MODE_WIDTH = 14  # "observe (ovr)", "refusing 100%", "observe +1 ovr"
# A flag's word too wide for the narrowest HEALTH, written shorter there (the legend and `?` give both).
SHORT_FLAGS = {"CLOSED·OBSERVED": "CLOSED·OBS"}


class Layout(NamedTuple):
    """The columns shown, in table order, with each one's width, and whether modes are written short."""

    columns: tuple[str, ...]
    widths: dict[str, int]
    short_modes: bool  # "observe (ovr)" for "observe (override)": 5 columns that an 80-column screen needs


def layout(width: int, widths: dict[str, int], order: Sequence[str]) -> Layout:
    """The columns shown at `width` terminal columns: `widths` holds each column's content width (HEALTH's
    is its widest; it takes what is left, at least HEALTH_MIN). The always-shown ones stay even when they
    overflow a very narrow screen (a horizontal scroll, with the flag, tool and argument pinned)."""
    room = width - 2  # the table's vertical scrollbar
    chosen = dict(widths)
    short = False

    def used(keys: Iterable[str]) -> int:
        return sum(chosen[key] + CELL_PADDING for key in keys)

    base = [key for key in ALWAYS if key != "health"]
    if used(base) + HEALTH_MIN + CELL_PADDING > room:
        short, chosen["mode"] = True, SHORT_MODE_WIDTH
    keys = list(base)
    for key in BY_USE:
        if used([*keys, key]) + HEALTH_MIN + CELL_PADDING <= room:
            keys.append(key)
    chosen["health"] = max(HEALTH_FLOOR, min(widths["health"], room - used(keys) - CELL_PADDING))
    keys.append("health")
    return Layout(tuple(key for key in order if key in keys), chosen, short)


def compact_count(value: int, width: int) -> str:
    """`value` in at most `width` characters: 1234 as is, else 12.3k, 4.5M; never cut to another number."""
    text = str(value)
    if len(text) <= width:
        return text
    for divisor, unit in ((1_000, "k"), (1_000_000, "M"), (1_000_000_000, "G")):
        for digits in (1, 0):
            shown = f"{value / divisor:.{digits}f}{unit}"
            if len(shown) <= width:
                return shown
    return "#" * width  # wider than any unit allows: plainly not a number


def fit_flags(flags: Iterable[str], width: int) -> str:
    """Health flags joined by spaces, whole flags only; those that do not fit are counted: "+2 more", "+2"."""
    flags = list(flags)
    for count in range(len(flags), 0, -1):
        head, rest = " ".join(flags[:count]), len(flags) - count
        for tail in (f" +{rest} more", f" +{rest}") if rest else ("",):
            if len(head + tail) <= width:
                return head + tail
    # Not even one fits whole: the first one's word without its count ("FAIL-CLOSED" for "FAIL-CLOSED 40"),
    # never a count cut into another number, nor half a word.
    word, rest = flags[0].split(" ")[0], len(flags) - 1
    short = SHORT_FLAGS.get(word, word)
    for text in (f"{word} +{rest}" if rest else word, word, f"{short} +{rest}" if rest else short, short):
        if len(text) <= width:
            return text
    return f"{len(flags)} flags"[:width]
