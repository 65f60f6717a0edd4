"""The package map in pyproject.toml against the tree: every package folder ships, and whatever lists the
folders by hand (the Dockerfile, the type-check links in the Makefile) lists them all."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]


def folder_of(package: str) -> Path:
    """The folder a dotted package lives in, through the longest package-dir prefix that maps it."""
    for prefix in sorted(PACKAGE_DIR, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix) :].lstrip(".").replace(".", "/")
            return ROOT / PACKAGE_DIR[prefix] / rest
    raise AssertionError(f"{package}: no package-dir entry maps it")


def test_every_package_folder_is_listed_and_every_listed_package_exists() -> None:
    listed = set(SETUPTOOLS["packages"])
    for package in listed:
        folder = folder_of(package)
        assert (folder / "__init__.py").is_file(), f"{package}: listed, but {folder} is no package"
    found = set()
    for prefix, root_folder in PACKAGE_DIR.items():
        for init in (ROOT / root_folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / root_folder)
            if "__pycache__" not in relative.parts:
                found.add(".".join([prefix, *relative.parts]))
    assert found - listed == set(), "package folders missing from pyproject.toml's packages (they would not ship)"


def test_the_dockerfile_copies_every_mapped_folder() -> None:
    copied = set(re.findall(r"^COPY\s+(?!--)(\S+?)/?\s+\S+$", (ROOT / "deploy" / "Dockerfile").read_text(), re.M))
    top_folders = {folder.split("/")[0] for folder in PACKAGE_DIR.values()}
    assert top_folders <= copied, f"the Dockerfile does not copy {sorted(top_folders - copied)}"


def test_the_typecheck_links_cover_every_mapped_folder() -> None:
    linked = dict(re.findall(r"ln -sfn \$\(CURDIR\)/(\S+) \$@/(\S+)", (ROOT / "Makefile").read_text()))
    for package, folder in PACKAGE_DIR.items():
        if package == "argwatch":
            continue  # its __init__.py and v1 are linked one by one
        assert linked.get(folder) == package.removeprefix("argwatch."), f"{folder}: no type-check link"
