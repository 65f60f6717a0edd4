"""What the gateway holds in memory: resident size on the demo policy, and bytes per member of a large set.

1. Demo policy: the real gateway (bench_server.py) on the bundled demo policy, its sets
   streamed from the demo owning service, after demo traffic; against a bare grpc.aio
   echo server process with the same imports, measured in the same run.
2. Large sets: a provider in this process receives snapshots of 100k and 1M members
   over a real watch stream from the bench owning service (its own process). Per size:
   resident growth per member, the members' UTF-8 per member (the "raw
   strings"), what the gateway adds over them, and that addition by table.

    python bench/memory.py                   # about 1 min
    python bench/memory.py --sizes 1000000 --traffic-seconds 5

Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import ECHO_METHOD
from figures import report
from refresh import Source, rss_bytes, started_provider, until_applied
from validate import payload, start_bench_server

from argwatch.server.sets.packed import PackedForms, PackedMembers
from argwatch.server.valuesets.provider import ValueSetProvider

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
MiB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak resident) of `pid`, in bytes."""
    found = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(line.split()[1]) * 1024
    return found


def stop(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def demo_policy(source_port: int) -> str:
    """The bundled demo policy and its file-based sets, pointed at a demo source on `source_port`."""
    folder = tempfile.mkdtemp(prefix="argwatch-memory-")
    with open(os.path.join(EXAMPLES, "policy.yaml")) as handle:
        text = handle.read()
    assert "127.0.0.1:50061" in text, "the demo policy no longer names its source target"
    with open(os.path.join(folder, "policy.yaml"), "w") as handle:
        handle.write(text.replace("127.0.0.1:50061", f"127.0.0.1:{source_port}"))
    shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), folder)
    return os.path.join(folder, "policy.yaml")


def echo_calls(target: str, count: int) -> None:
    body = payload()
    with grpc.insecure_channel(target) as channel:
        echo = channel.unary_unary(ECHO_METHOD)
        for _ in range(count):
            echo(body, timeout=5)


def demo_gateway(traffic_seconds: float) -> dict[str, object]:
    """Resident size of the gateway on the demo policy after demo traffic, and of a bare echo server."""
    source_port = free_port()
    source = subprocess.Popen(
        [sys.executable, os.path.join(EXAMPLES, "demo_source.py"), "--listen", f"127.0.0.1:{source_port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    gateway = echo = None
    try:
        time.sleep(1.0)  # the gateway also waits for its sets at start; this only avoids a first fail-open
        gateway, gateway_target = start_bench_server("--policy", demo_policy(source_port))
        echo, echo_target = start_bench_server("--echo-only")
        started = process_memory(gateway.pid)
        rate = 200.0
        traffic = subprocess.run(
            [
                sys.executable,
                os.path.join(EXAMPLES, "traffic.py"),
                "--target",
                gateway_target,
                "--rate",
                str(rate),
                "--duration",
                str(traffic_seconds),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=traffic_seconds + 30,
        )
        if traffic.returncode != 0:
            raise SystemExit(f"demo traffic failed with {traffic.returncode}")
        calls = int(rate * traffic_seconds)
        echo_calls(echo_target, calls)
        return {
            "gateway_at_start": started,
            "gateway_after_traffic": process_memory(gateway.pid),
            "echo_after_calls": process_memory(echo.pid),
            "calls": calls,
        }
    finally:
        for process in (gateway, echo):
            if process is not None:
                stop(process)
        source.terminate()
        source.wait(timeout=10)


def pymalloc_size(value: str) -> int:
    """What a str object occupies: its size rounded up to the allocator's 16-byte classes."""
    return (sys.getsizeof(value) + 15) // 16 * 16


def accounting(provider: ValueSetProvider, name: str) -> dict[str, float]:
    """Per member: the members' UTF-8 (the raw strings), what they would take as str objects, and each table."""
    reading = provider.read(name)
    assert reading is not None
    snapshot = reading.snapshot
    members, index = snapshot.members, snapshot.loose_index
    assert isinstance(members, PackedMembers) and isinstance(index, PackedForms), "a large set is held packed"
    size = snapshot.size
    parts = members.parts()
    tables = {part: held / size for part, held in parts.items() if part != "members' UTF-8" and held}
    tables["loose index"] = index.table_bytes() / size
    return {
        "raw_string_bytes_per_member": parts["members' UTF-8"] / size,
        "as_str_objects_bytes_per_member": sum(pymalloc_size(member) for member in members) / size,
        **tables,
    }


async def large_sets(sizes: list[int]) -> list[dict[str, object]]:
    """Per size: resident growth per member over a real watch stream, and the accounting by table."""
    source = Source()
    names = [f"bench.s{size}" for size in sizes]
    try:
        provider = await started_provider(source, names)
        rows = []
        for size, name in zip(sizes, names, strict=True):
            gc.collect()
            before = rss_bytes()
            source.send(f"publish {name} {size}")
            await until_applied(provider, name, size, 120)
            source.ack()
            await asyncio.sleep(3.0)  # the provider hands freed memory back 1 s after a large install
            gc.collect()
            grown = (rss_bytes() - before) / size
            tables = accounting(provider, name)
            raw = tables["raw_string_bytes_per_member"]
            rows.append({"members": size, "rss_bytes_per_member": grown, "over_raw": grown - raw, **tables})
        await provider.close()
        return rows
    finally:
        source.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--traffic-seconds", type=float, default=15.0)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()

    demo = demo_gateway(args.traffic_seconds)
    start, after, echo = demo["gateway_at_start"], demo["gateway_after_traffic"], demo["echo_after_calls"]
    assert isinstance(start, dict) and isinstance(after, dict) and isinstance(echo, dict)
    print(f"demo policy, after {demo['calls']} calls of demo traffic (bare echo: as many echo calls):")
    print(f"{'process':<28} {'RSS MiB':>8} {'peak MiB':>9}")
    print(f"{'gateway, at start':<28} {start['VmRSS'] / MiB:>8.1f} {start['VmHWM'] / MiB:>9.1f}")
    print(f"{'gateway, after traffic':<28} {after['VmRSS'] / MiB:>8.1f} {after['VmHWM'] / MiB:>9.1f}")
    print(f"{'bare grpc.aio echo server':<28} {echo['VmRSS'] / MiB:>8.1f} {echo['VmHWM'] / MiB:>9.1f}")
    print(f"the gateway over the bare server: {(after['VmRSS'] - echo['VmRSS']) / MiB:+.1f} MiB\n")

    rows = asyncio.run(large_sets(args.sizes))
    table_names = [key for key in rows[0] if key not in ("members", "rss_bytes_per_member", "over_raw")]
    header = f"{'members':>9} | {'RSS B/member':>12} | {'over raw':>8} | " + " | ".join(
        f"{name.replace('_bytes_per_member', '').replace('_', ' '):>17}" for name in table_names
    )
    print("bytes per member (raw: the members' UTF-8; the tables as counted in-process; RSS growth measured):")
    print(header)
    for row in rows:
        cells = " | ".join(f"{float(row[name]):>17.1f}" for name in table_names)  # type: ignore[arg-type]
        print(
            f"{row['members']:>9} | {float(row['rss_bytes_per_member']):>12.1f} | "  # type: ignore[arg-type]
            f"{float(row['over_raw']):>8.1f} | {cells}"  # type: ignore[arg-type]
        )
    # Issue 31's goal is at 1M members: the largest set measured (1M by default).
    largest = max(({k: float(v) for k, v in row.items()} for row in rows), key=lambda row: row["members"])  # type: ignore[arg-type]
    over_raw = largest["over_raw"]
    report(
        f"memory per member over the raw strings, a {largest['members']:,.0f}-member set",
        over_raw,
        "B",
        "<= 32 B",
        over_raw <= 32,
        f"RSS grew {largest['rss_bytes_per_member']:.0f} B a member, its UTF-8 takes "
        f"{largest['raw_string_bytes_per_member']:.0f} B (as str objects "
        f"{largest['as_str_objects_bytes_per_member']:.0f} B); same run",
    )

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"memory-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump({"python": platform.python_version(), "demo": demo, "large_sets": rows}, handle, indent=2)
    print(f"\nwritten: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
