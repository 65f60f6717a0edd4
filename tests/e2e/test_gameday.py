"""The game day's short form (bench/gameday.py --short): a fleet on loopback through seven faults, every row ok.

`make gameday` plays the same scenarios longer and prints the table docs/operating.md shows.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(150)
def test_the_short_game_day_holds_on_every_scenario() -> None:
    played = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gameday.py"), "--short"],
        capture_output=True,
        text=True,
        timeout=140,
        check=False,
    )
    rows = [line for line in played.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert played.returncode == 0, played.stdout[-4000:] + played.stderr[-4000:]
    table = rows[len(rows) // 2 :]  # printed row by row as it went, then whole
    scenarios = [row.split(" | ")[0].removeprefix("| ") for row in table[1:]]
    assert scenarios == [
        "steady load",
        "owner restart (kill -9)",
        "owner hang (SIGSTOP)",
        "gateway rolling restart + policy change",
        "redis restart (empty)",
        "reload of a broken policy",
        "owner down, fail open one source",
    ]
    assert all(row.endswith("| ok |") for row in table[1:]), "\n".join(table)
