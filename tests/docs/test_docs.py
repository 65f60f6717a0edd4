"""The docs: the MkDocs site builds strictly, the README is short with working links, and the repo stands on its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
README_LIMIT_BYTES = 10_240
# Markdown links and images, [text](target); the target up to a space or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# What no file may mention: the notes that used to live outside the repository (this file is skipped,
# and builds the names from parts all the same).
FORBIDDEN = ("../shared/", "DESIGN" + ".md", "STYLE" + ".md", "BENCHMARKING" + ".md")


def tracked_files() -> list[Path]:
    """The repository's files as git lists them (tracked, and new ones not ignored), else a walk of the tree."""
    if shutil.which("git") is not None:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True
        )
        if listed.returncode == 0 and listed.stdout:
            return [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    return list(_walk(ROOT))


def _walk(folder: Path) -> Iterator[Path]:
    skipped = {".git", ".venv", "node_modules", "build", ".site", ".demo", ".fuzz", "__pycache__", ".mypy_cache"}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in skipped and not d.endswith(".egg-info")]
        for name in filenames:
            yield Path(dirpath) / name


def nav_pages(nav: Any) -> list[str]:
    """Every Markdown file named in mkdocs.yml's nav, however deeply nested."""
    if isinstance(nav, str):
        return [nav] if nav.endswith(".md") else []
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def test_the_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    """mkdocs build --strict succeeds: no broken link, anchor or nav entry in docs/, and the API reference
    finds every module it renders."""
    # The import tree the API reference reads (mkdocs.yml's mkdocstrings paths), as `make docs` links it.
    subprocess.run(["make", "--silent", ".venv/typecheck/argwatch"], cwd=ROOT, check=True, capture_output=True)
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_readme_is_short_and_its_relative_links_resolve() -> None:
    """README.md is at most 10 KB, and every relative link in it points at a file or folder of the repository."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= README_LIMIT_BYTES, f"README.md is {readme.stat().st_size} bytes"
    broken = []
    for target in LINK.findall(readme.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the README itself
        path = target.split("#", 1)[0]
        if not (ROOT / path).exists():
            broken.append(target)
    assert not broken, f"README.md links to missing files: {broken}"


def test_the_nav_lists_every_page_and_only_existing_pages() -> None:
    """Every docs/*.md file is in mkdocs.yml's nav, and every page in the nav exists."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = set(nav_pages(config["nav"]))
    docs = ROOT / config.get("docs_dir", "docs")
    on_disk = {str(path.relative_to(docs)) for path in docs.rglob("*.md")}
    assert on_disk - in_nav == set(), "pages missing from the nav"
    assert in_nav - on_disk == set(), "nav entries without a page"


def test_no_tracked_file_points_at_notes_outside_the_repository() -> None:
    """No tracked file mentions ../shared/ or the design, style and benchmarking notes kept outside the repository."""
    this_file = Path(__file__).resolve()
    offenders: list[str] = []
    for path in tracked_files():
        if path.resolve() == this_file or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files
        offenders.extend(f"{path.relative_to(ROOT)}: {word}" for word in FORBIDDEN if word in text)
    assert not offenders, offenders
