"""The locks agree with pyproject.toml and each other: every requirement, of argwatch and of each extra, is pinned there
at a version the requirement accepts. (make test installs from the lock, so a dependency added to
pyproject.toml and not locked would never be installed, and one locked outside its range would be.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def locked(name: str = "test.lock") -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            package, _, version = line.partition("==")
            assert version, f"requirements/{name}: {line!r} is not pinned with =="
            pins[canonicalize_name(package)] = version.strip()
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


def test_the_image_runs_what_the_tests_ran() -> None:
    """requirements/runtime.lock (the Dockerfile installs it) pins argwatch's dependencies, and each at the
    version the tests ran."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, tested = locked("runtime.lock"), locked()
    for requirement in (Requirement(r) for r in project["dependencies"]):
        assert canonicalize_name(requirement.name) in runtime, f"{requirement.name}: not in runtime.lock"
    differ = {name: (pin, tested.get(name)) for name, pin in runtime.items() if tested.get(name) != pin}
    assert not differ, f"runtime.lock and test.lock disagree (run `make lock`): {differ}"
