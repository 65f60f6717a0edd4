"""Layering: the server never imports Textual, the TUI never imports the server, the checker needs no wire types."""

from __future__ import annotations

import subprocess
import sys


def loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(out.split())


def test_the_server_does_not_import_textual_or_the_tui() -> None:
    modules = loaded_after("import argwatch.server.app, argwatch.server.cli")
    assert not any(m == "textual" or m.startswith(("textual.", "argwatch.tui")) for m in modules)


def test_the_tui_does_not_import_the_server() -> None:
    modules = loaded_after(
        "import argwatch.tui.app, argwatch.tui.run, argwatch.tui.status_line, argwatch.tui.admin_client"
    )
    assert not any(m.startswith("argwatch.server") for m in modules)


def test_the_checker_and_policy_work_without_generated_code() -> None:
    modules = loaded_after(
        "import argwatch.server.checker, argwatch.server.policy_loader, argwatch.server.repair_message"
    )
    assert not any(m.startswith("argwatch.v1.") for m in modules)
    assert "grpc" not in modules
