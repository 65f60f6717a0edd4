"""The protos against buf: lint clean (exceptions justified in the protos), no breaking change since the release."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASED = ROOT / "proto" / "released" / "argwatch-v1.json"
BUF = shutil.which("buf", path=os.path.dirname(sys.executable)) or shutil.which("buf")


def buf(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    assert BUF is not None, "buf is missing: it installs with the test extras (buf-bin)"
    environment = {**os.environ, "BUF_CACHE_DIR": str(cache)}
    return subprocess.run([BUF, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def test_the_protos_are_lint_clean(tmp_path: Path) -> None:
    result = buf("lint", cwd=ROOT, cache=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_nothing_a_client_depends_on_changed_since_the_release(tmp_path: Path) -> None:
    result = buf("breaking", "--against", str(RELEASED), cwd=ROOT, cache=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("  string call_id = 1;", "  string call_id = 99;", 'Previously present field "1" with name "call_id"'),
        ("  string tool = 1;", "  string tool_name = 1;", 'changed name from "tool" to "tool_name"'),
    ],
)
def test_a_renumbered_or_renamed_field_is_caught(tmp_path: Path, before: str, after: str, expected: str) -> None:
    module = tmp_path / "module"
    shutil.copytree(ROOT / "proto" / "argwatch", module / "proto" / "argwatch", ignore=shutil.ignore_patterns("*.py*"))
    shutil.copy(ROOT / "buf.yaml", module / "buf.yaml")
    gateway = module / "proto" / "argwatch" / "v1" / "gateway.proto"
    text = gateway.read_text()
    assert before in text
    gateway.write_text(text.replace(before, after))
    result = buf("breaking", "--against", str(RELEASED), cwd=module, cache=tmp_path / "cache")
    assert result.returncode != 0
    assert expected in result.stdout, result.stdout + result.stderr
