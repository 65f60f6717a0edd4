"""A large set's retired history: the longest step of building it, and the first delta after it, at retired_keep.

For a set past PACK_ABOVE members (whose deltas layer over its history), with
`retired_keep` values retired (dates out of order, an age kept), in this
process and with the collector off while timing (the code's own cost, not
where a collection falls):

1. a snapshot built from the owner's retired values, step by step as the
   gateway builds it (make_snapshot_async's steps): its longest step, and the
   first delta after it; against, in the same run, what that delta did before
   the history was layered as it was built (LayeredHistory.over, then the delta);
2. the same with both of the owner's lists (plain values and values with
   details), trimmed as they are read;
3. a set rebuilt whole after a delta (its layers past their hard bound): the
   history handed on as a RetiredHistory, its longest step; against the copy and
   the age's scan it took in one step before (RetiredHistory.copy, keep_to); and
   the same after a delta that retired a fifth of retired_keep, which the keep
   then drops.

    python bench/retired_history.py                       # 10,000 and 100,000 retired values, about 10 s
    python bench/retired_history.py --sizes 10000 --repeats 1

No network; every loop is bounded.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from argwatch.server.sets.overlay import with_delta
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate, Retirement
from argwatch.server.sets.retired import RetiredHistory, RetiredKeep, layered_history_steps
from argwatch.server.sets.snapshot import ValueSetSnapshot, snapshot_steps

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = 2_000_000.0
AGE = 1e9  # kept, and passing none: the dates are sorted and walked, nothing is dropped for age
MEMBERS = [f"member-{n:07d}" for n in range(PACK_ABOVE + 5_000)]


def stepped(steps: Generator[Any, Any, Any]) -> tuple[list[float], Any]:
    """Runs a builder as the gateway does, a step at a time: each step's time on the loop in ms, and what it
    made. A function it yields is run here but not timed: the gateway runs it on a worker thread."""
    times: list[float] = []
    made = None
    while True:
        started = time.perf_counter()
        try:
            step = steps.send(made)
        except StopIteration as built:
            times.append((time.perf_counter() - started) * 1e3)
            return times, built.value
        times.append((time.perf_counter() - started) * 1e3)
        made = step() if step is not None else None


def over_5_ms(times: list[float]) -> float:
    return float(sum(1 for ms in times if ms > 5))


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    made = action()
    return (time.perf_counter() - started) * 1e3, made


def first_delta(snapshot: ValueSetSnapshot, size: int) -> ValueSetSnapshot | None:
    """One member added and one removed (retired), the keep as the snapshot was built with."""
    delta = DeltaUpdate(snapshot.name, snapshot.version, snapshot.version + 1, ("added",), (MEMBERS[3],), {})
    return with_delta(snapshot, delta, now=NOW + 1, rules=(), keep=RetiredKeep(size, AGE, NOW + 1))


def measure(size: int) -> dict[str, float]:
    keep = RetiredKeep(size, AGE, NOW)
    owner = {f"retired-{n:07d}": Retirement(NOW - 1_000 + (n * 7919) % size, "") for n in range(size)}
    plain = [f"plain-{n:07d}" for n in range(size)]
    found: dict[str, float] = {}

    times, snapshot = stepped(snapshot_steps("s", 1, MEMBERS, (), NOW, (), owner, frozenset(), keep))
    found["build_longest_step_ms"], found["build_steps_over_5_ms"] = max(times), over_5_ms(times)
    found["first_delta_ms"], _ = timed(lambda: first_delta(snapshot, size))
    # Before: the same snapshot holding its history plain, as it was built then; its first delta layered it.
    history = snapshot.retirements.copy()
    plain_held = replace(snapshot, retired=frozenset(history), retirements=history, loose_retired=history.loose_forms())
    found["first_delta_before_ms"], _ = timed(lambda: first_delta(plain_held, size))

    times, _ = stepped(snapshot_steps("s", 1, MEMBERS, plain, NOW, (), owner, frozenset(), keep))
    found["both_lists_longest_step_ms"], found["both_lists_steps_over_5_ms"] = max(times), over_5_ms(times)
    # Before: past the bound, each chunk's trim also scanned the whole history for the age.
    full = RetiredHistory((value, info) for value, info in owner.items())
    found["both_lists_scan_a_step_before_ms"], _ = timed(lambda: full.keep_to(keep))

    handed_on = snapshot.retirements.copy()  # what updates.retired_after hands a rebuild
    times, _ = stepped(layered_history_steps("s", frozenset(), (), handed_on, keep))
    found["rebuild_longest_step_ms"] = max(times)
    found["rebuild_step_before_ms"], _ = timed(lambda: handed_on.copy().keep_to(keep))
    # A rebuild after a large delta: its removals retired on top of a full history, so the keep drops as many.
    handed_on = handed_on.copy()  # a new one, as retired_after makes: the one before is the last build's base
    for value in MEMBERS[: size // 5]:
        handed_on.retire(value, Retirement(NOW + 1, ""))
    times, _ = stepped(layered_history_steps("s", frozenset(), (), handed_on, keep))
    found["rebuild_dropping_longest_step_ms"] = max(times)
    found["rebuild_dropping_step_before_ms"], _ = timed(lambda: handed_on.copy().keep_to(keep))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3, help="each figure the best of this many runs")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    print(f"a set of {len(MEMBERS):,} members; ms, best of {args.repeats}, the collector off while timing")
    print(f"{'retired':>8} | {'build: longest':>14} {'>5ms':>4} | {'1st delta':>9} {'(before)':>8} | "
          f"{'2 lists: longest':>16} {'>5ms':>4} {'(+ a step before)':>17} | "
          f"{'rebuild: longest':>16} {'(before)':>8} | {'dropping 1/5':>12} {'(before)':>8}")  # fmt: skip
    for size in args.sizes:
        runs = []
        for _ in range(args.repeats):
            gc.collect()
            gc.disable()
            try:
                runs.append(measure(size))
            finally:
                gc.enable()
        # Each time the best of the runs; each count of slow steps the worst.
        best = {key: (max if key.endswith("over_5_ms") else min)(run[key] for run in runs) for key in runs[0]}
        results[str(size)] = best
        print(f"{size:>8,} | {best['build_longest_step_ms']:>14.2f} {best['build_steps_over_5_ms']:>4.0f} | "
              f"{best['first_delta_ms']:>9.2f} {best['first_delta_before_ms']:>8.2f} | "
              f"{best['both_lists_longest_step_ms']:>16.2f} {best['both_lists_steps_over_5_ms']:>4.0f} "
              f"{best['both_lists_scan_a_step_before_ms']:>17.2f} | "
              f"{best['rebuild_longest_step_ms']:>16.2f} {best['rebuild_step_before_ms']:>8.2f} | "
              f"{best['rebuild_dropping_longest_step_ms']:>12.2f} "
              f"{best['rebuild_dropping_step_before_ms']:>8.2f}")  # fmt: skip
    print("(before), measured in this run: the first delta on the same snapshot holding its history plain (it")
    print("layered it); the age's scan of the whole history that each chunk's trim added once past the bound")
    print("(to about 100 steps with both lists at 100,000); a rebuild's copy and scan of the history, one step,")
    print("also after a delta that retired a fifth of retired_keep on top of a full history (the keep drops as many).")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, time.strftime("retired-history-%Y%m%dT%H%M%S.json"))
    with open(path, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
