"""`argwatch policy test`: YAML test cases judged offline by the gateway's Validator; exit 0 pass, 1 fail, 2 invalid."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import Policy

if TYPE_CHECKING:
    from argwatch.server.policytest.run import CaseResult

PASSED, FAILED, INVALID = 0, 1, 2


def add_command(
    policy_commands: argparse._SubParsersAction[argparse.ArgumentParser],
    command: Callable[..., argparse.ArgumentParser],
) -> None:
    """Registers `policy test` under `policy`, through build_parser's `command` helper."""
    test = command(
        "test",
        "check a policy's verdicts against YAML test cases, offline",
        "Judge each test case's call with the gateway's own Validator, offline, against the sets and records\n"
        "the case gives, and compare the verdict with the one it expects (decision, problems, skipped checks).\n"
        "Exits 0 when every case passes, 1 when any fails (a diff per case), 2 when a test file or policy\n"
        "is invalid or names a tool, set, record or problem code the policy does not know.",
        policy_commands,
        "policy test",
    )
    test.add_argument("files", nargs="+", metavar="FILE", help="the test files (YAML)")
    test.add_argument("--policy", default="", help="the policy to test (default: each file's own `policy:`)")
    test.add_argument("--json", action="store_true", help="print the results as JSON")
    test.set_defaults(run=run_policy_test)


def run_policy_test(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from argwatch.server.policytest.cases import TestFileError, read_test_file
    from argwatch.server.policytest.report import as_json, as_text
    from argwatch.server.policytest.run import prepare, run_case

    errors: list[str] = []
    policies: dict[str, Policy | None] = {}
    batches = []
    # Every file is read and resolved before any case runs: an invalid file fails the run, never half of it.
    for path in args.files:
        try:
            test_file = read_test_file(path)
        except OSError as error:
            errors.append(f"{path}: cannot read: {error.strerror}")
            continue
        except TestFileError as error:
            errors.extend(error.errors)
            continue
        policy_path = args.policy or test_file.policy
        if not policy_path:
            errors.append(f"{path}: no policy: give `policy:` in the file or --policy")
            continue
        key = os.path.abspath(policy_path)
        if key not in policies:
            policies[key] = _policy(policy_path, errors)
        policy = policies[key]
        if policy is None:
            continue
        try:
            batches.append((policy, prepare(policy, test_file.cases)))
        except TestFileError as error:
            errors.extend(error.errors)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"argwatch policy test: {len(errors)} error(s); no case was run", file=sys.stderr)
        return INVALID

    async def run_all() -> list[CaseResult]:
        return [await run_case(policy, one) for policy, cases in batches for one in cases]

    # A set a case does not give is, by design, unavailable to its checks (the verdict then shows what failed
    # open or closed); the provider's warning about each, per case, would only bury the results.
    quieted = logging.getLogger("argwatch.valuesets")
    level = quieted.level
    quieted.setLevel(logging.ERROR)
    try:
        results = asyncio.run(run_all())
    finally:
        quieted.setLevel(level)  # as it was: run in-process (a test, a tool), the caller's logging is its own
    print(json.dumps(as_json(results), indent=2) if args.json else as_text(results))
    return PASSED if all(result.passed for result in results) else FAILED


def _policy(path: str, errors: list[str]) -> Policy | None:
    try:
        return load_policy(path)
    except PolicyError as error:
        errors.append(f"{path}: invalid policy:\n{error}")
    except OSError as error:
        errors.append(f"{path}: cannot read the policy: {error.strerror}")
    return None
