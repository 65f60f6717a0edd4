"""The decision log's cost in instructions, which the machine's speed does not change: cachegrind, log off and on.

Runs a gateway judging bench/decision_log.py's calls under valgrind's
cachegrind (instructions only, no cache simulation), four times: the log off
and on, each with 1 and with 3 passes of the calls. The difference between the
3-pass and the 1-pass run, per call, is what a call costs without the start-up;
on minus off is what the log adds (its writer's thread, rotation every MiB and
packing included; the kernel's share is not counted). About 2 minutes; needs
valgrind (Debian's `valgrind`), which `make test` does not install.

    python bench/decision_log_instructions.py [--calls 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


async def judge(passes: int, calls_count: int, logged: bool) -> None:
    """The child's work: build a gateway (with the log or not) and judge the calls `passes` times."""
    sys.path.insert(0, HERE)
    from bench_server import bench_settings
    from decision_log import caught_up, logged_settings, varied_calls

    from argwatch.server.decisions.writer import DecisionLogWriter
    from argwatch.server.process.app import build_gateway

    with tempfile.TemporaryDirectory(prefix="argwatch-decisions-") as folder:
        policy = os.path.join(HERE, "policy.yaml")
        settings = logged_settings(policy, folder) if logged else bench_settings(policy)
        gateway = await build_gateway(settings)
        calls = varied_calls(calls_count)
        validate = gateway.validator.validate
        for _ in range(passes):
            for call in calls:
                await validate(call)
        writer = gateway.decisions
        caught_up(writer if isinstance(writer, DecisionLogWriter) else None, passes * calls_count)
        await gateway.stop(0)


def instructions(passes: int, calls: int, logged: bool) -> int:
    """The instructions cachegrind counted in a child judging the calls `passes` times."""
    child = [sys.executable, os.path.abspath(__file__), "--child", str(passes), "--calls", str(calls)]
    if logged:
        child.append("--logged")
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *child],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"cachegrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4_000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # passes, in the child under valgrind
    parser.add_argument("--logged", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child is not None:
        asyncio.run(judge(arguments.child, arguments.calls, arguments.logged))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured")
        return 2
    per_call = {}
    for logged in (False, True):
        runs = {passes: instructions(passes, arguments.calls, logged) for passes in (1, 3)}
        per_call[logged] = (runs[3] - runs[1]) / (2 * arguments.calls)
    off, on = per_call[False], per_call[True]
    print(f"instructions a call (cachegrind, {arguments.calls} calls, 3 passes less 1)")
    print(f"  validate, no log      {off:10,.0f}")
    print(f"  validate, log on      {on:10,.0f}")
    print(f"  added by the log      {on - off:10,.0f}  ({(on - off) / off:.2f} of validate's own)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
