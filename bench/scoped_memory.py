"""What a scoped value set costs beside the same members unscoped: bytes per member of each, and the ratio.

One run builds the same members twice with the gateway's own snapshot builder
(make_snapshot_async, a chunk at a time, as a source's payload hands them
over): once as a global set, once scoped per customer (the scope keys a scoped
set's wire members become, sets/scoped.py). The default: a million
payment-method ids ("pm_" and 14 characters) over 100,000 customers ("cus_"
and 6 digits), 10 each. The issue's bound: scoped costs at most 2x unscoped.

Each copy is measured with tracemalloc: every byte it holds, its member
strings included (made while tracing, the input then dropped), so the figure
is what the gateway keeps per member. Resident growth is printed beside it as
a check. Then, per table, what each adds per member.

    python bench/scoped_memory.py                     # about 1-2 min
    python bench/scoped_memory.py --members 200000 --scopes 20000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import string
import sys
import time
import tracemalloc
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figures import report
from refresh import rss_bytes

from argwatch.server.sets.packed import PackedForms, PackedMembers
from argwatch.server.sets.scoped import scope_key
from argwatch.server.sets.snapshot import ValueSetSnapshot, make_snapshot_async

HERE = os.path.dirname(os.path.abspath(__file__))


def values(count: int, seed: int = 7) -> list[str]:
    """`count` distinct payment-method ids: "pm_" and 14 random characters."""
    chosen = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits
    found: set[str] = set()
    while len(found) < count:
        found.add("pm_" + "".join(chosen.choices(alphabet, k=14)))
    return sorted(found)


def scopes_for(count: int, scopes: int) -> list[str]:
    """The customer of each value: 100k customers of 10 values each by default, as an owner sends them."""
    return [f"cus_{index * scopes // count:06d}" for index in range(count)]


def measured(make: Callable[[], list[str]], scoped: bool) -> tuple[ValueSetSnapshot, int, int]:
    """A copy built from the members `make` returns; (copy, bytes it holds by tracemalloc, resident growth)."""
    gc.collect()
    resident = rss_bytes()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    members = make()
    snapshot = asyncio.run(make_snapshot_async("bench.pm", 1, members, received_at=time.time(), scoped=scoped))
    del members
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return snapshot, held - base, rss_bytes() - resident


def pymalloc_size(value: object) -> int:
    return (sys.getsizeof(value) + 15) // 16 * 16


def tables(snapshot: ValueSetSnapshot) -> dict[str, float]:
    """Bytes per member of each part, counted in-process: the members' UTF-8, then each table over it."""
    members, index = snapshot.members, snapshot.loose_index
    assert isinstance(members, PackedMembers) and isinstance(index, PackedForms), "a large set is held packed"
    found = {part: held for part, held in members.parts().items() if held}
    found["loose index"] = index.table_bytes()
    return {name: total / snapshot.size for name, total in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--scopes", type=int, default=100_000)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    count, scopes = args.members, args.scopes

    plain = values(count)
    owners = scopes_for(count, scopes)
    rows = {}
    for name, scoped, make in (
        # Both inputs are made while tracing, as a source's conversion makes them: the unscoped strings afresh
        # by a join (a slice or `+ ""` of a whole str is the same object), the scoped ones as scope keys.
        ("unscoped", False, lambda: ["".join(("pm_", value[3:])) for value in plain]),
        ("scoped", True, lambda: [scope_key(owner, value) for owner, value in zip(owners, plain, strict=True)]),
    ):
        started = time.perf_counter()
        snapshot, held, resident = measured(make, scoped)
        seconds = time.perf_counter() - started
        assert snapshot.size == count
        rows[name] = {
            "bytes_per_member": held / count,
            "rss_bytes_per_member": resident / count,
            "build_seconds_traced": seconds,
            "tables": tables(snapshot),
        }
        del snapshot
        gc.collect()

    ratio = rows["scoped"]["bytes_per_member"] / rows["unscoped"]["bytes_per_member"]  # type: ignore[operator]
    print(f"{count} members; scoped over {scopes} scopes ({count // scopes} members each)")
    print(f"{'copy':<10} {'bytes/member':>13} {'RSS growth/member':>18}")
    for name, row in rows.items():
        print(f"{name:<10} {row['bytes_per_member']:>13.1f} {row['rss_bytes_per_member']:>18.1f}")
    print(f"scoped / unscoped: {ratio:.2f}x (the bound: 2x)")
    for name, row in rows.items():
        over = row["bytes_per_member"] - row["tables"]["members' UTF-8"]  # type: ignore[index, operator]
        print(f"{name}: {over:.1f} B a member over the members' UTF-8 (issue 31's bound: 32 B)")
        row["over_raw"] = over
    print()
    over = rows["scoped"]["over_raw"]
    report(
        f"memory per member over the raw strings, a {count:,}-member scoped set",
        over,  # type: ignore[arg-type]
        "B",
        "<= 32 B",
        over <= 32,  # type: ignore[operator]
        f"{count // scopes} members a scope; unscoped {rows['unscoped']['over_raw']:.1f} B; same run",
    )
    print("per table, bytes per member:")
    names = list(dict.fromkeys(key for row in rows.values() for key in row["tables"]))  # type: ignore[attr-defined]
    print(f"{'table':<18} {'unscoped':>9} {'scoped':>9}")
    for table in names:
        cells = [row["tables"].get(table) for row in rows.values()]  # type: ignore[attr-defined]
        print(f"{table:<18} " + " ".join(f"{cell:>9.1f}" if cell is not None else f"{'-':>9}" for cell in cells))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"scoped-memory-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump(
            {"python": platform.python_version(), "members": count, "scopes": scopes, "ratio": ratio, **rows},
            handle,
            indent=2,
        )
    print(f"\nwritten: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
