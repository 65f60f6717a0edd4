"""Packaging: a wheel built from the tree carries generated stubs under argwatch.v1, no bare server/tui package,
and the client's and owners' libraries typed for their users."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once for the module's tests."""
    folder = tmp_path_factory.mktemp("wheel")
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
            str(folder),
            ROOT,
        ],
        check=True,
        capture_output=True,
    )
    (built,) = folder.glob("*.whl")
    return built


def test_the_wheel_has_the_stubs_and_only_the_argwatch_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
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
    assert "argwatch = argwatch.server.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    for typed in ("client", "sources", "common", "v1"):
        assert f"argwatch/{typed}/py.typed" in names, typed


# A user's mistakes, which mypy must see through the installed package: were any of these names Any, it
# would pass them all.
MISTAKES = """
from argwatch.client import Gateway, Outcome, Session, from_openai
from argwatch.sources import ValueSetCatalog


async def mistakes(gateway: Gateway, outcome: Outcome) -> None:
    await gateway.report_outcome(outcome, "timeout")
    await gateway.check(from_openai({}), conversation_id="conv-42")
    code: int = outcome.problems[0].code
    ValueSetCatalog().publish("s", ["A"], replaced_by=["A"])
    Session(customer_id=7)
"""


@pytest.mark.slow
def test_a_users_script_type_checks_strictly_against_the_installed_wheel_with_no_any(
    wheel: Path, tmp_path: Path
) -> None:
    """The wheel, installed into a fresh venv, gives mypy --strict real types: tests/e2e/typed_user_code.py
    (Gateway.check on an openai SDK object, the MCP gate, ValueSetCatalog) passes with --disallow-any-expr,
    so no Any reaches the user, and a user's mistakes are each reported.

    The venv holds argwatch only as installed from the wheel (not this tree, nor its editable install);
    its dependencies are this environment's, linked in (no download), less the type stubs (types-grpcio,
    types-protobuf, ...) that a user need not have."""
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    python = fresh / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    deps = tmp_path / "deps"
    deps.mkdir()
    for found in Path(site.getsitepackages()[0]).iterdir():
        if not (
            "argwatch" in found.name
            or found.name.startswith(("__editable__", "types_"))
            or found.name.endswith(("-stubs", ".pth"))
        ):
            (deps / found.name).symlink_to(found)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(f"{deps}\n")
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(Path(__file__).parent / "typed_user_code.py", user / "user_code.py")
    (user / "user_mistakes.py").write_text(MISTAKES)
    # --strict everywhere; --disallow-any-expr for the user's code alone (the mistakes would trip it anyway).
    (user / "mypy.ini").write_text("[mypy]\nstrict = True\n\n[mypy-user_code]\ndisallow_any_expr = True\n")
    checked = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--python-executable", str(python), "--config-file", "mypy.ini"),
            *("--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "user_code.py", "user_mistakes.py"),
        ],
        cwd=user,
        capture_output=True,
        text=True,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if line.startswith("user_code.py")], checked.stdout
    reported = {int(line.split(":")[1]) for line in errors if line.startswith("user_mistakes.py")}
    lines = MISTAKES.splitlines()
    expected = {number for number, line in enumerate(lines, 1) if line.startswith("    ")}
    assert reported == expected, checked.stdout
