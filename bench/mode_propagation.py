"""How long a mode change made through one replica takes to be enforced by the others, through a real Redis.

Three gateways in this process share a redis-server started on a free loopback
port (no persistence). Each flip goes through replica 0's mode control. The
time runs until replicas 1 and 2 both enforce it (seen by their mode listeners).

    .venv/bin/python bench/mode_propagation.py [--flips 50]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace

from prometheus_client import CollectorRegistry

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from figures import report

from argwatch.server.policy.model import Mode
from argwatch.server.process.app import build_gateway
from argwatch.sources import ValueSetCatalog
from tests.conftest import REASON_CODES, loopback_settings, make_policy, start_source
from tests.redis_server import start_redis


async def measure(flips: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        redis = start_redis(folder)
        catalog = ValueSetCatalog()
        catalog.publish("refunds.reason_codes", REASON_CODES)
        catalog.publish("identity.handles", ["someone"])
        source = await start_source(catalog)
        policy = make_policy(folder, source.target)
        gateways = [
            await build_gateway(
                replace(loopback_settings(policy.path), redis=redis.url, replica_id=f"replica-{n}"),
                policy=policy,
                registry=CollectorRegistry(),
            )
            for n in range(3)
        ]
        try:
            times = []
            arrived = asyncio.Event()
            wanted: list[Mode] = []

            def check(tool: str, mode: Mode) -> None:  # called on every replica's mode recompute
                if wanted and all(g.modes.mode_for("refund_order") is wanted[0] for g in gateways[1:]):
                    arrived.set()

            for gateway in gateways[1:]:
                gateway.modes.subscribe(check)
            for flip in range(flips):
                mode = Mode.OBSERVE if flip % 2 == 0 else Mode.REJECT
                wanted[:] = [mode]
                arrived.clear()
                started = time.perf_counter()
                await gateways[0].control.set_mode("refund_order", mode, actor="bench", reason=f"flip {flip}")
                async with asyncio.timeout(10):
                    await arrived.wait()
                times.append((time.perf_counter() - started) * 1000)
            ordered = sorted(times)
            print(
                f"mode change through one replica, enforced by the other two ({flips} flips): "
                f"median {statistics.median(ordered):.1f} ms, p90 {ordered[int(0.9 * (len(ordered) - 1))]:.1f} ms, "
                f"max {ordered[-1]:.1f} ms (the goal: under 1 s)"
            )
            # The bench prints no p99 (50 flips make it nearly the max): the max is held to issue 31's p99 goal.
            report(
                f"mode change across 3 replicas, max of {flips} flips",
                ordered[-1],
                "ms",
                "p99 <= 5 ms (held to the max)",
                ordered[-1] <= 5,
            )
        finally:
            for gateway in gateways:
                await gateway.stop(0)
            await source.stop()
            redis.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flips", type=int, default=50)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # every flip is audited in the log; the figures are what matter here
    asyncio.run(measure(args.flips))


if __name__ == "__main__":
    main()
