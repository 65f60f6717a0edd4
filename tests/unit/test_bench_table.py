"""`make bench`'s closing table: each reported figure against its goal, and a bench that failed shown, not lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_run(script: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_table_lists_figures_against_goals_and_the_benches_that_failed(tmp_path: Path) -> None:
    figures = tmp_path / "figures.jsonl"
    env = {**os.environ, "ARGWATCH_BENCH_FIGURES": str(figures)}
    assert bench_run("table.py", "--begin", str(figures), env=env).returncode == 0
    reporter = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); from figures import report; "
        "report('membership, 1 bound argument', 4.9, 'us', '<= 3 us', False, '1.2x the echo, same run'); "
        "report('Validate / bare echo', 0.93, 'x', '>= 0.90', True)"
    )
    subprocess.run([sys.executable, "-c", reporter, "gate.py"], env=env, check=True, timeout=60)
    with figures.open("a") as handle:
        handle.write(json.dumps({"ran": "gate.py", "exit": 0}) + "\n")
        handle.write(json.dumps({"ran": "churn.py", "exit": 2}) + "\n")
        handle.write(json.dumps({"ran": "memory.py", "exit": 0}) + "\n")
    out = tmp_path / "table.md"
    shown = bench_run("table.py", str(figures), "--out", str(out), env=env)
    assert shown.returncode == 1  # a bench failed: make bench fails, after the table
    table = out.read_text()
    assert (
        "| membership, 1 bound argument (`-c gate.py`) | 4.90 us (1.2x the echo, same run) | <= 3 us | **no** |"
        in table
    )
    assert "| Validate / bare echo (`-c gate.py`) | 0.930 x | >= 0.90 | yes |" in table
    assert "| `churn.py` failed (exit 2) | reported nothing | — | **failed** |" in table
    assert "with no figure for this table" in table and "`memory.py`" in table
    assert "CPUs, Python" in table.splitlines()[2]  # the machine it ran on


def test_a_bench_run_alone_writes_no_figures(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "ARGWATCH_BENCH_FIGURES"}
    reporter = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from figures import report; report('x', 1, 's')"
    subprocess.run([sys.executable, "-c", reporter], env=env, cwd=tmp_path, check=True, timeout=60)
    assert list(tmp_path.iterdir()) == []
