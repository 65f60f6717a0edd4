"""A corpus beside production: the replay's rates next to a live gateway's, per tool and argument, with the difference.

The two are measured by one predicate (the same Validator, the same counters),
so where they differ, the traffic differs: a corpus that over-represents
conversations in which the value cannot be recovered from the text reads higher
than production, and that gap is itself the finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argwatch.server.replay.report import ReplayReport
from argwatch.server.telemetry.status_windows import WINDOWS_SECONDS
from argwatch.v1 import admin_pb2

WINDOWS = WINDOWS_SECONDS  # the Admin API's windows


@dataclass(frozen=True)
class Side:
    checks: int
    out_of_set: int
    out_of_set_normalised: int

    @property
    def rate(self) -> float:
        return self.out_of_set / self.checks if self.checks else 0.0

    @property
    def normalised_rate(self) -> float:
        return self.out_of_set_normalised / self.checks if self.checks else 0.0


@dataclass(frozen=True)
class Comparison:
    tool: str
    argument: str
    corpus: Side
    live: Side | None  # None: the live gateway has no such row

    @property
    def difference(self) -> float | None:
        """Corpus rate minus live rate, as a fraction (None when either side checked nothing)."""
        if self.live is None or not self.live.checks or not self.corpus.checks:
            return None
        return self.corpus.rate - self.live.rate


def compare(report: ReplayReport, status: admin_pb2.GetStatusResponse, window_seconds: int) -> list[Comparison]:
    """One row per bound argument the corpus checked, beside the live row's figures over `window_seconds`."""
    if window_seconds not in WINDOWS:
        raise ValueError(f"the live gateway keeps windows of {', '.join(map(str, WINDOWS))} seconds")
    live: dict[tuple[str, str], Side] = {}
    for row in status.arguments:
        for figures in row.windows:
            if figures.window_seconds == window_seconds:
                live[row.tool, row.argument] = Side(
                    figures.value_checks, figures.out_of_set, figures.out_of_set_normalised
                )
    rows = []
    for tool in report.tools:
        for argument in tool.arguments:
            if not argument.value_set:
                continue  # rates are of values checked against a set
            counts = argument.counts
            corpus = Side(counts.checks, counts.out_of_set, counts.out_of_set_normalised)
            rows.append(Comparison(tool.tool, argument.argument, corpus, live.get((tool.tool, argument.argument))))
    return rows


def comparison_text(rows: list[Comparison], target: str, window_seconds: int) -> str:
    window = {60: "1m", 900: "15m", 3600: "1h"}[window_seconds]
    header = (
        "tool",
        "argument",
        "corpus checks",
        "corpus oos%",
        f"live {window} checks",
        f"live {window} oos%",
        "diff",
    )
    table = [header]
    for row in rows:
        live = row.live
        difference = row.difference
        table.append(
            (
                row.tool,
                row.argument,
                f"{row.corpus.checks:,}",
                f"{100 * row.corpus.rate:.1f}%",
                f"{live.checks:,}" if live else "-",
                f"{100 * live.rate:.1f}%" if live and live.checks else "-",
                f"{100 * difference:+.1f} pp" if difference is not None else "-",
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"beside the live gateway at {target} (its last {window}):"]
    for line in table:
        lines.append(
            "  "
            + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        )
    return "\n".join(lines)


def comparison_json(rows: list[Comparison], target: str, window_seconds: int) -> dict[str, Any]:
    def side(figures: Side | None) -> dict[str, Any] | None:
        if figures is None:
            return None
        return {
            "checks": figures.checks,
            "out_of_set": figures.out_of_set,
            "out_of_set_rate": round(figures.rate, 6),
            "out_of_set_normalised": figures.out_of_set_normalised,
            "out_of_set_normalised_rate": round(figures.normalised_rate, 6),
        }

    return {
        "live": target,
        "window_seconds": window_seconds,
        "rows": [
            {
                "tool": row.tool,
                "argument": row.argument,
                "corpus": side(row.corpus),
                "live": side(row.live),
                "difference": None if row.difference is None else round(row.difference, 6),
            }
            for row in rows
        ],
    }
