"""A time-boxed atheris run of the request path (tests/fuzz/fuzz_validate.py): no crash, the same verdict twice."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# make test installs it (the lock has every extra); a quicker setup without argwatch[fuzz] skips, saying so.
pytest.importorskip("atheris", reason="atheris is in the fuzz extra: pip install -e '.[fuzz]'")

HERE = Path(__file__).resolve().parent
SECONDS = 8  # in make test; `make fuzz` runs it for 5 minutes


def test_fuzzing_the_request_path_finds_no_crash_and_no_unstable_verdict(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(HERE / "corpus", corpus)
    result = subprocess.run(
        [sys.executable, str(HERE / "fuzz_validate.py"), f"-max_total_time={SECONDS}", "-rss_limit_mb=2048",
         "-print_final_stats=1", str(corpus)],
        cwd=tmp_path, capture_output=True, text=True, timeout=SECONDS + 120,
    )  # fmt: skip
    runs = [line for line in result.stderr.splitlines() if line.startswith("stat::number_of_executed_units")]
    assert result.returncode == 0, result.stderr[-4000:]
    assert runs and int(runs[0].split(":")[-1]) > 1000, result.stderr[-2000:]
    assert not list(tmp_path.glob("crash-*"))
