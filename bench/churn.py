"""A large set under steady churn: how far behind the owner the gateway's copy falls, its loop's stalls, and RSS.

The owning service (its own process, bench_source.py) publishes a set of SIZE
members, then sends RATE deltas a second for SECONDS (each adds one member or
removes one, built with ValueSetCatalog.add/remove). A gateway-side provider in
this process watches it. For every version: the time from the owner's change
to the provider holding it (both read CLOCK_MONOTONIC, which is one clock for
the whole machine; seen by a 1 ms poll). Also the longest event-loop stall (a
1 ms ticker), the compactions of the layers (overlay.py), and RSS by tenth of
the run.

    python bench/churn.py                                   # 1M members, 100 deltas/s, 5 minutes
    python bench/churn.py --size 200000 --seconds 30

Traffic goes to 127.0.0.1 only; the run is bounded by SECONDS.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from array import array
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_control import Control, cpu_control
from figures import report
from loop_work import longest_callback
from refresh import Source, rss_bytes, started_provider, until_applied

from argwatch.server.sets.overlay import base_members
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.valuesets.set_table import RELEASE_AFTER_SECONDS

HERE = os.path.dirname(os.path.abspath(__file__))
STALL_SECONDS = 0.01  # a loop that has not ticked for this long is stalled


async def run(source: Source, size: int, rate: float, seconds: float, stacks: Counter[str] | None) -> dict[str, object]:
    name = "bench.churned"
    provider = await started_provider(source, [name])
    source.send(f"publish {name} {size}")
    await until_applied(provider, name, size, 300)
    source.ack()
    await asyncio.sleep(RELEASE_AFTER_SECONDS + 0.5)  # the load's memory handed back before RSS's first sample
    # The bench's own records live in this process beside the gateway's copy: held in arrays sized before the
    # first RSS sample, so that what RSS shows growing is the gateway's, not a list of a million ticks.
    capacity = int(rate * seconds * 1.2) + 10_000  # versions the watch can record: every delta's, and more
    seen_versions, seen_at = array("q", bytes(8 * capacity)), array("d", bytes(8 * capacity))
    stalls = array("d", bytes(8 * int(seconds * 1000 * 1.2 + 60_000)))
    counts = [0, 0]  # versions seen, ticks recorded
    rss: list[int] = []
    bases: set[int] = set()
    done = asyncio.Event()

    ticked = [time.monotonic()]
    collections: list[tuple[int, float]] = []  # (generation, seconds) of each cycle collection
    started_at: list[float] = [0.0]

    def timed_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started_at[0] = time.perf_counter()
        else:
            collections.append((info["generation"], time.perf_counter() - started_at[0]))

    gc.callbacks.append(timed_collection)
    if stacks is not None:
        threading.Thread(target=_sample_stalls, args=(ticked, done, stacks), daemon=True).start()

    async def watch() -> None:
        """Every 1 ms: the version held (the first time each is seen), the loop's lateness, the base's identity."""
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = ticked[0] = time.monotonic()
            if counts[1] < len(stalls):
                stalls[counts[1]] = now - last - 0.001
                counts[1] += 1
            last = now
            snapshot = _held(provider, name)
            if (counts[0] == 0 or snapshot.version > seen_versions[counts[0] - 1]) and counts[0] < capacity:
                seen_versions[counts[0]], seen_at[counts[0]] = snapshot.version, now
                counts[0] += 1
            bases.add(id(base_members(snapshot)))  # under every level of layers: a new one only by a compaction

    async def sample_rss() -> None:
        while not done.is_set():
            rss.append(rss_bytes())
            await asyncio.sleep(seconds / 10)

    path = os.path.join(tempfile.mkdtemp(), "published.json")
    tasks = [asyncio.create_task(watch()), asyncio.create_task(sample_rss())]
    with cpu_control() as control, longest_callback() as work:
        source.send(f"churn {name} {rate} {seconds} {path}")
        await asyncio.get_running_loop().run_in_executor(None, source.ack)
        await asyncio.sleep(0.2)  # the last deltas land
        done.set()
        await asyncio.gather(*tasks)
    gc.callbacks.remove(timed_collection)
    await provider.close()
    published = await asyncio.to_thread(_published, path)
    lags = []
    held = list(zip(seen_versions[: counts[0]], seen_at[: counts[0]], strict=True))  # versions rise: first seen
    index = 0
    for version, at in published:
        while index < len(held) and held[index][0] < version:
            index += 1
        lags.append(float("inf") if index == len(held) else max(0.0, held[index][1] - at))
    return {
        "published": published,
        "lags": lags,
        "stalls": list(stalls[: counts[1]]),
        "stalls_full": counts[1] == len(stalls),
        "rss": rss,
        "bases": len(bases),
        "collections": collections,
        "longest_callback_cpu_ms": work.seconds * 1000,
        "longest_callback": work.where,
        "longest_callbacks": work.worst(),
        "control": control,
    }


def _published(path: str) -> list[tuple[int, float]]:
    with open(path) as handle:
        return [(int(version), float(at)) for version, at in json.load(handle)]


def _sample_stalls(ticked: list[float], done: asyncio.Event, stacks: Counter[str]) -> None:
    """From a thread: while the loop has not ticked for STALL_SECONDS, what the loop's thread is running."""
    loop_thread = threading.main_thread().ident
    while not done.is_set():
        time.sleep(0.002)
        if time.monotonic() - ticked[0] > STALL_SECONDS:
            frame = sys._current_frames().get(loop_thread or 0)
            if frame is not None:
                lines = traceback.format_stack(frame)[-6:]
                stacks["".join(line.split("\n")[0] + "\n" for line in lines)] += 1


def _held(provider: ValueSetProvider, name: str):  # type: ignore[no-untyped-def]
    reading = provider.read(name)
    assert reading is not None
    return reading.snapshot


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument(
        "--stall-stacks", action="store_true", help="print where the loop's thread was while it stalled"
    )
    args = parser.parse_args()
    source = Source()
    try:
        stacks: Counter[str] | None = Counter() if args.stall_stacks else None
        found = asyncio.run(run(source, args.size, args.rate, args.seconds, stacks))
    finally:
        source.close()
    lags = [lag * 1000 for lag in found["lags"]]  # type: ignore[attr-defined]
    stalls = [stall * 1000 for stall in found["stalls"]]  # type: ignore[attr-defined]
    rss = [value / 2**20 for value in found["rss"]]  # type: ignore[attr-defined]
    late = sum(1 for lag in lags if lag > 50)
    print(f"{len(lags)} deltas on a {args.size:,}-member set at {args.rate:g}/s for {args.seconds:g} s")
    print(
        f"owner to gateway: p50 {quantile(lags, 0.5):.1f} ms, p99 {quantile(lags, 0.99):.1f} ms, "
        f"max {max(lags):.1f} ms; over 50 ms: {late}"
    )
    if found["stalls_full"]:
        print("the ticks outran their array: the loop stalls after it filled are not counted")
    over_goal = sum(1 for stall in stalls if stall > 5)
    print(
        f"loop stall: p99 {quantile(stalls, 0.99):.1f} ms, max {max(stalls):.1f} ms; "
        f"over 5 ms: {over_goal} of {len(stalls):,} ticks"
    )
    print(
        f"the loop's longest callback, its thread's CPU time (loop_work.py): {found['longest_callback_cpu_ms']:.1f} ms"
        f" (by callback: {found['longest_callbacks']})"
    )
    control: Control = found["control"]  # type: ignore[assignment]
    print(control.words())
    started = found["published"][0][1]  # type: ignore[index]
    worst: dict[int, float] = {}
    for (_, at), lag in zip(found["published"], lags, strict=True):  # type: ignore[call-overload]
        second = int(at - started)
        worst[second] = max(worst.get(second, 0.0), lag)
    slow = sorted(worst.items(), key=lambda item: -item[1])[:5]
    print("worst seconds (from the start, max lag ms): " + ", ".join(f"{s}s {lag:.0f}" for s, lag in sorted(slow)))
    print(f"bases held (1 + compactions): {found['bases']}")
    for generation in (0, 1, 2):
        times = [spent * 1000 for gen, spent in found["collections"] if gen == generation]  # type: ignore[attr-defined]
        if times:
            print(f"cycle collections, generation {generation}: {len(times)}, longest {max(times):.1f} ms")
    print("RSS MiB by tenth: " + ", ".join(f"{value:.0f}" for value in rss))
    churned = f"{args.rate:g} deltas/s on a {args.size:,}-member set for {args.seconds:g} s"
    lag_p99, stall_max = quantile(lags, 0.99), max(stalls)
    report(f"{churned}: owner to gateway, p99", lag_p99, "ms", "<= 50 ms", lag_p99 <= 50)
    report(f"{churned}: deltas over 50 ms behind", late, f"of {len(lags):,}", "0", late == 0)
    report(f"{churned}: loop stall, max", stall_max, "ms", "<= 5 ms", stall_max <= 5)
    report(f"{churned}: loop ticks (1 ms) late by over 5 ms", over_goal, f"of {len(stalls):,}")
    work_ms = float(found["longest_callback_cpu_ms"])  # type: ignore[arg-type]
    # Read against a fixed piece of work's readings by the same clock in the same run (cpu_control.py says why).
    control_words = (
        f"a fixed {control.result['median_ms']:.2f} ms piece of work in a process beside the run read up to "
        f"{control.result['max_ms']:.2f} ms (cpu_control.py), same run"
        if control.result
        else "the control beside the run gave no reading"
    )
    report(
        f"{churned}: the loop's longest callback, its thread's CPU time (loop_work.py)",
        work_ms,
        "ms",
        baseline=control_words,
    )
    # "RSS flat" sets no number to judge by: the growth is shown, the table does not call it met. The first
    # sample is taken as the deltas start, with the snapshot's load not yet handed back: growth from the second.
    after_load = rss[1] if len(rss) > 1 else rss[0]
    report(
        f"{churned}: RSS, the last sample less the second (the first holds the load)",
        rss[-1] - after_load,
        "MiB",
        "flat",
    )
    for stack, samples in (stacks or Counter()).most_common(6):
        print(f"\nstalled {samples * 2} ms (2 ms samples) in:\n{stack}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"churn-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump(
            {
                "size": args.size,
                "rate": args.rate,
                "seconds": args.seconds,
                "lag_ms": {"p50": quantile(lags, 0.5), "p99": quantile(lags, 0.99), "max": max(lags), "over_50": late},
                "stall_ms": {"p99": quantile(stalls, 0.99), "max": max(stalls)},
                "bases": found["bases"],
                "control": control.result,
                "rss_mib": rss,
                "lags_ms": lags,
            },
            handle,
            indent=2,
        )
    print(f"\nwritten: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
