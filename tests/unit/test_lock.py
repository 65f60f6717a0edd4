"""The lock agrees with pyproject.toml: every requirement, of argwatch and of each extra, is pinned there
at a version the requirement accepts. (make test installs from the lock, so a dependency added to
pyproject.toml and not locked would never be installed, and one locked outside its range would be.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements" / "test.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements/test.lock: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_requirement_of_argwatch_and_its_extras_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += [Requirement(r) for r in extra]
    pins = locked()
    problems = []
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            problems.append(f"{requirement}: not in the lock")
        elif not requirement.specifier.contains(pin, prereleases=True):
            problems.append(f"{requirement}: locked at {pin}")
    assert not problems, "run `make lock`:\n" + "\n".join(problems)
