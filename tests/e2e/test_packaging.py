"""Packaging: a wheel built from the tree carries generated stubs under argwatch.v1, and no bare server/tui package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.e2e


def test_the_wheel_has_the_stubs_and_only_the_argwatch_namespace(tmp_path) -> None:
    # --no-build-isolation: use this environment's pinned grpcio-tools and setuptools,
    # so the test needs no download; setup.py still generates the stubs.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            ROOT,
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = [name for name in os.listdir(tmp_path) if name.endswith(".whl")]
    names = zipfile.ZipFile(tmp_path / wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top_level == {"argwatch"}
    for module in ("gateway", "sources", "admin"):
        assert f"argwatch/v1/{module}_pb2.py" in names
        assert f"argwatch/v1/{module}_pb2_grpc.py" in names
        assert f"argwatch/v1/{module}.proto" in names
    for shipped in (
        "argwatch/server/verdict/set_checks.py",
        "argwatch/server/cli/__main__.py",  # how `serve --workers` starts each worker
        "argwatch/tui/status_line.py",
        "argwatch/sources/__init__.py",
        "argwatch/common/channels.py",
        "argwatch/client/_gateway.py",
    ):
        assert shipped in names, shipped
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "argwatch = argwatch.server.cli:main" in zipfile.ZipFile(tmp_path / wheel).read(entry_points).decode()
