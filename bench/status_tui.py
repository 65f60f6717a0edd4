"""What watching costs at 200 tools x 5 arguments: a status snapshot on the gateway, and a table update in the TUI.

Part 1 builds the real gateway in-process on a generated policy (200 tools, 5
set-bound arguments each, file-sourced sets), sends calls through the real
Validator so every series exists, and times Admin.GetStatus over loopback, with
Health.Check on the same Admin server as the baseline (the RPC's own cost).

Part 2 runs the real TUI headless (Textual's run_test) and times how long it
takes to apply one snapshot of that size to the table: the first (which builds
1000 rows) and then snapshots whose figures all changed (cells updated in
place), against the 1 s refresh the TUI keeps up with.

    .venv/bin/python bench/status_tui.py [--samples 30]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time

import grpc
from prometheus_client import CollectorRegistry

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.process.settings import Settings
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc

TOOLS, ARGUMENTS, MEMBERS = 200, 5, 50


def write_policy(folder: str) -> str:
    sets = os.path.join(folder, "sets.yaml")
    with open(sets, "w") as handle:
        for a in range(ARGUMENTS):
            members = ", ".join(f"V{a}_{m}" for m in range(MEMBERS))
            handle.write(f"set{a}:\n  version: 1\n  members: [{members}]\n")
    lines = ["default_mode: observe", "sources:", "  local: {file: sets.yaml}", "value_sets:"]
    lines += [f"  set{a}: {{source: local}}" for a in range(ARGUMENTS)]
    lines.append("tools:")
    for t in range(TOOLS):
        lines += [f"  tool{t:03d}:", "    arguments:"]
        lines += [f"      arg{a}: {{value_set: set{a}}}" for a in range(ARGUMENTS)]
    path = os.path.join(folder, "policy.yaml")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered):7.2f} ms  p90 {p90:7.2f} ms"


async def gateway_side(samples: int, seconds: float) -> admin_pb2.GetStatusResponse:
    with tempfile.TemporaryDirectory() as folder:
        path = write_policy(folder)
        settings = Settings(policy=path, listen="127.0.0.1:0", admin_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
        gateway = await build_gateway(settings, policy=load_policy(path), registry=CollectorRegistry())
        try:
            for t in range(TOOLS):
                for i in range(10):  # every argument: some in the set, some not
                    arguments = {f"arg{a}": f"V{a}_{i}" if (i + a) % 4 else f"v{a}-{i}" for a in range(ARGUMENTS)}
                    await gateway.validator.validate(ToolCall(f"tool{t:03d}", arguments, f"c{t}-{i}"))
            gateway.windows.sample()
            gc.freeze()  # as `argwatch serve` does once built: long-lived objects leave the collector's scans
            async with grpc.aio.insecure_channel(gateway.admin_target) as channel:
                admin = admin_pb2_grpc.AdminStub(channel)
                status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=30)
                status_ms, bare_ms = [], []
                for _ in range(samples):  # interleaved, so both see the same machine
                    started = time.perf_counter()
                    await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=30)
                    bare_ms.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=30)
                    status_ms.append((time.perf_counter() - started) * 1000)
            print(
                f"gateway: {len(status.tools)} tools, {len(status.arguments)} argument rows, "
                f"{status.ByteSize() / 1024:.0f} KiB per snapshot"
            )
            print(f"  GetStatus       {summary(status_ms)}")
            print(f"  ListModeChanges {summary(bare_ms)}   (baseline: an Admin RPC that does nothing)")
            ratio = statistics.median(status_ms) / statistics.median(bare_ms)
            print(f"  snapshot cost: {ratio:.0f}x the bare RPC; at one watcher per second the loop is busy "
                  f"{statistics.median(status_ms) / 10:.1f}% of the time")  # fmt: skip
            async with grpc.aio.insecure_channel(gateway.admin_target) as channel:
                await validate_while_watched(channel, gateway.target, seconds)
            return status
        finally:
            await gateway.stop(0)


async def validate_while_watched(admin_channel: grpc.aio.Channel, target: str, seconds: float) -> None:
    """Validate latency (one call in flight) with and without a TUI watching every second, alternating
    2 s windows so both see the same machine."""
    admin = admin_pb2_grpc.AdminStub(admin_channel)
    latencies: dict[bool, list[float]] = {False: [], True: []}
    request = gateway_pb2.ValidateRequest(tool="tool007", arguments_json=b'{"arg0": "V0_1", "arg1": "v1-9"}')
    async with grpc.aio.insecure_channel(target) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        for window in range(int(seconds / 2)):
            watched = window % 2 == 1
            stream = admin.WatchStatus(admin_pb2.WatchStatusRequest(interval_seconds=1.0)) if watched else None
            ends = time.perf_counter() + 2.0
            while time.perf_counter() < ends:
                started = time.perf_counter()
                await stub.Validate(request, timeout=10)
                latencies[watched].append((time.perf_counter() - started) * 1000)
            if stream is not None:
                stream.cancel()

    def line(values: list[float]) -> str:
        ordered = sorted(values)
        return (
            f"p50 {ordered[len(ordered) // 2]:6.2f} ms  p99 {ordered[int(0.99 * (len(ordered) - 1))]:6.2f} ms  "
            f"max {ordered[-1]:6.2f} ms  ({len(ordered)} calls)"
        )

    print("  Validate, one in flight, no watcher:      " + line(latencies[False]))
    print("  Validate, one in flight, a TUI watching:  " + line(latencies[True]))


class StaticApi:
    """Serves snapshots handed to it; the TUI side of the bench."""

    target = "bench"

    def __init__(self) -> None:
        self.queue: asyncio.Queue[admin_pb2.GetStatusResponse] = asyncio.Queue()

    async def watch(self, interval: float, selection: admin_pb2.StatusSelection | None = None):  # type: ignore[no-untyped-def]
        while True:
            yield await self.queue.get()


def bumped(status: admin_pb2.GetStatusResponse, step: int) -> admin_pb2.GetStatusResponse:
    """The same snapshot with every figure changed, as a busy gateway's next second would be."""
    changed = admin_pb2.GetStatusResponse()
    changed.CopyFrom(status)
    for tool in changed.tools:
        for window in tool.windows:
            window.per_second += step
            window.repair_started += step
    for argument in changed.arguments:
        for window in argument.windows:
            window.value_checks += 10 * step
            window.out_of_set += step
            window.out_of_set_normalised += step
        argument.out_of_set_per_minute[-1] += step
        argument.checks_per_minute[-1] += 10 * step
    return changed


async def tui_side(status: admin_pb2.GetStatusResponse, samples: int) -> None:
    from argwatch.tui.app import ArgwatchApp

    app = ArgwatchApp(StaticApi())  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        started = time.perf_counter()
        app.show_status(status)
        await pilot.pause()
        first = (time.perf_counter() - started) * 1000
        updates = []
        for step in range(1, samples + 1):
            snapshot = bumped(status, step)
            started = time.perf_counter()
            app.show_status(snapshot)
            await pilot.pause()  # the repaint included
            updates.append((time.perf_counter() - started) * 1000)
    print(f"tui: {len(app._sources)} rows")
    print(f"  first snapshot (builds the table)   {first:7.2f} ms")
    print(f"  next snapshots (every cell changed) {summary(updates)}")
    print(f"  share of the 1 s refresh budget: {statistics.median(updates) / 10:.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20.0, help="Validate with and without a watcher")
    args = parser.parse_args()
    status = asyncio.run(gateway_side(args.samples, args.seconds))
    asyncio.run(tui_side(status, args.samples))


if __name__ == "__main__":
    main()
