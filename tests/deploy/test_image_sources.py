"""The image builds from exactly what the Dockerfile copies: the wheel is built from a folder holding only the
build stage's COPY sources, installed alone, and its `argwatch serve --help` and `argwatch health` run without
the TUI's stack. (Docker itself does not run here; this is the part of its build that can.) Issue 18.5: the
Dockerfile once copied server/ and tui/ but not client/, and the build failed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()

pytestmark = pytest.mark.e2e


def build_stage_copies() -> list[tuple[list[str], str]]:
    build = DOCKERFILE[: DOCKERFILE.index("\nFROM", DOCKERFILE.index("FROM") + 1)]
    copies = []
    for line in re.findall(r"^COPY\s+(?!--)(.+)$", build, re.MULTILINE):
        *sources, destination = line.split()
        copies.append((sources, destination))
    return copies


def test_the_wheel_built_from_the_copied_files_alone_serves(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for sources, destination in build_stage_copies():
        into = context / destination  # every destination here is a folder ("./", "proto/", ...), as COPY has it
        for source in sources:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, into, ignore=shutil.ignore_patterns("__pycache__", "*_pb2*", "*.so"))
            else:
                into.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, into / origin.name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(wheels),
         str(context)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    site = tmp_path / "site"
    (wheel,) = wheels.glob("argwatch-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    # The installed wheel first on the path, and Textual unavailable, as in the server image.
    probe = (
        f"import sys; sys.path.insert(0, {str(site)!r}); sys.modules['textual'] = None\n"
        "import argwatch.server.cli as cli\n"
        f"assert cli.__file__.startswith({str(site)!r}), cli.__file__\n"
        "from argwatch.server.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    served = subprocess.run(
        [sys.executable, "-c", probe, "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert served.returncode == 0, served.stderr
    assert "--policy FILE" in served.stdout
    unhealthy = subprocess.run(
        [sys.executable, "-c", probe, "health", "--gateway", "127.0.0.1:1", "--timeout", "1s"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert unhealthy.returncode == 1 and "UNAVAILABLE" in unhealthy.stderr


def test_the_image_checks_its_health_over_grpc_and_runs_unprivileged() -> None:
    final = DOCKERFILE[DOCKERFILE.rindex("\nFROM") :]
    assert re.search(r'^HEALTHCHECK .*CMD \["argwatch", "health"', final, re.MULTILINE)
    assert re.search(r"^USER 10001", final, re.MULTILINE)
    runs = " ".join(re.findall(r"^RUN (.+)$", DOCKERFILE, re.MULTILINE))
    assert "[tui]" not in runs  # the server image installs argwatch without the TUI's extra
