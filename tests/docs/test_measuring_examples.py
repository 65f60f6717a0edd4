"""docs/measuring.md's worked examples are what the commands print: computed, not typed in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from argwatch.server.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "measuring.md"


def block_after(marker: str) -> list[str]:
    """The lines of the first fenced block in docs/measuring.md that starts with `marker`."""
    text = PAGE.read_text()
    found = re.search(r"```\n(" + re.escape(marker) + r".*?)\n```", text, re.S)
    assert found, f"docs/measuring.md has no block starting {marker!r}"
    return found.group(1).splitlines()


def test_the_replay_example_is_the_command_s_output(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    code = main(
        [
            "replay",
            "examples/replay/corpus.jsonl",
            "--policy",
            "examples/replay/policy.yaml",
            "--sets",
            "examples/replay/sets.json",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    shown = block_after("replayed ")

    def steady(lines: list[str]) -> list[str]:
        return [line for line in lines if " calls judged in " not in line]  # the timing line varies by run

    assert steady(printed) == steady(shown)
