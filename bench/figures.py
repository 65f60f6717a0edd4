"""The figures a bench measured, one JSON line each, for the table `make bench` ends with (bench/table.py)."""

from __future__ import annotations

import json
import os
import sys

# `make bench` names the file. A bench run alone, without it, prints its figures as ever and writes nothing.
VARIABLE = "ARGWATCH_BENCH_FIGURES"


def bench_name() -> str:
    """The bench as the Makefile runs it ("validate.py --gate"): the Makefile writes each run's exit status under
    the same name, so table.py can tell a bench that failed from one that has no figure for the table."""
    return " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])


def report(
    figure: str,
    value: float,
    unit: str,
    goal: str | None = None,
    met: bool | None = None,
    baseline: str | None = None,
) -> None:
    """One figure as the bench measured it in this run. `goal` is the goal's words ("<= 5 ms"), `met` the
    caller's verdict on it (None: no goal, or none the figure can be judged by), `baseline` what it compares
    with in the same run, in words ("0.91x of a bare echo in the same run")."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    record = {
        "bench": bench_name(),
        "figure": figure,
        "value": float(value),
        "unit": unit,
        "goal": goal,
        "met": met,
        "baseline": baseline,
    }
    # Opened, written and closed per figure: a bench that crashes later keeps what it measured before.
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
