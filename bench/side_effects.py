"""What the repeat check of a tool with side effects costs per call, in-process, against the same tool without it.

The same refund tool (schema only, so the figures are the side-effect path's
own cost) is judged three ways in one run: without `side_effect` (the
baseline), with it on local memory (one replica, no Redis), and with it on a
real redis-server on loopback (every replica's calls seen: a new operation is
one script, SET NX then SET of its call id; a repeat is that script, a GET and
a SET). A row prices one round trip on its own, for scale. Each
new-operation call is a distinct operation (another order id); each repeat
call repeats one. A refused repeat is also a rejected call, with the rejection's
own bookkeeping (attempts, repair state), so it is set against a call refused
for its arguments, on the same cache.

    python bench/side_effects.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_server import bench_settings
from prometheus_client import CollectorRegistry
from timing import best_micros

from argwatch.server.edge import wire
from argwatch.server.policy.loader import parse_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.v1 import gateway_pb2
from tests.redis_server import start_redis

CALLS = 2_000
REPEATS = 5
POLICY = """
tools:
  refund_order:
    mode: reject
    schema:
      type: object
      properties: {order_id: {type: string}, amount_cents: {type: integer}, note: {type: string}}
      required: [order_id, amount_cents]
    side_effect: {same_operation: [order_id, amount_cents], window: 15m}
"""


def calls(count: int, distinct: bool, invalid: bool = False) -> Iterator[Any]:
    """Decoded calls: each of another operation (`distinct`), or all of one; `invalid`: the amount missing."""
    conversation = uuid.uuid4().hex  # a run of its own: Redis outlives a run
    for index in range(count):
        order = f"ord_{index}" if distinct else "ord_0"
        arguments: dict[str, object] = {"order_id": order, "amount_cents": 1200, "note": "damaged in transit"}
        if invalid:
            del arguments["amount_cents"]
        request = gateway_pb2.ValidateRequest(
            tool="refund_order",
            arguments_json=orjson.dumps(arguments),
            conversation_id=conversation,
            call_id=f"c{index}-{distinct}",
        )
        yield wire.call_from_request(request)


async def per_call(
    folder: str, *, side_effect: bool, redis_url: str = "", distinct: bool = True, invalid: bool = False
) -> tuple[float, int]:
    """Microseconds per call, and the Redis operations that failed or timed out (their calls fell back to
    local memory: a row with any is not a Redis figure)."""
    path = os.path.join(folder, "policy.yaml")
    await asyncio.to_thread(Path(path).write_text, POLICY)
    policy = parse_policy(POLICY.encode(), path)
    if not side_effect:
        tool = dataclasses.replace(policy.tools["refund_order"], side_effect=None)
        policy = dataclasses.replace(policy, tools=MappingProxyType({"refund_order": tool}))
    cache, registry = None, CollectorRegistry()
    if redis_url:
        # 1 s, not the gateway's 50 ms: one loop stall on this shared machine would otherwise send the
        # next second of calls to local memory, and the row would no longer be a Redis figure.
        cache = SharedCache(redis_from_url(redis_url), GatewayMetrics(registry), timeout=1.0)
    gateway = await build_gateway(bench_settings(path), policy=policy, cache=cache)
    try:
        supply = calls(CALLS * REPEATS + 1, distinct, invalid)
        first = await gateway.validator.validate(next(supply))  # connects, warms
        assert (first.problems == ()) is not invalid
        gc.collect()
        micros = await best_micros(lambda: gateway.validator.validate(next(supply)), CALLS, REPEATS)
        failed = sum(
            sample.value
            for family in registry.collect()
            for sample in family.samples
            if sample.name == "argwatch_shared_cache_errors_total"
        )
        return micros, int(failed)
    finally:
        await gateway.stop(0)


async def round_trip(redis_url: str) -> tuple[float, int]:
    """One aiocache GET of a missing key from the same redis-server: what one round trip costs here."""
    registry = CollectorRegistry()
    cache = SharedCache(redis_from_url(redis_url), GatewayMetrics(registry), timeout=1.0)
    try:
        await cache.start()
        micros = await best_micros(lambda: cache.get("bench:absent"), CALLS, REPEATS)
    finally:
        await cache.close()
    failed = registry.get_sample_value("argwatch_shared_cache_errors_total", {"operation": "get"}) or 0
    return micros, int(failed)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        redis = start_redis(folder)
        try:
            baseline = await per_call(folder, side_effect=False)
            rows = [
                ("one Redis round trip (a GET), for scale", await round_trip(redis.url)),
                ("no side_effect (baseline)", baseline),
                (
                    "no side_effect: a call refused for its arguments",
                    await per_call(folder, side_effect=False, invalid=True),
                ),
                ("side_effect, local memory: a new operation", await per_call(folder, side_effect=True)),
                ("side_effect, local memory: a repeat", await per_call(folder, side_effect=True, distinct=False)),
                (
                    "no side_effect, redis-server: refused for arguments",
                    await per_call(folder, side_effect=False, redis_url=redis.url, invalid=True),
                ),
                (
                    "side_effect, redis-server: a new operation",
                    await per_call(folder, side_effect=True, redis_url=redis.url),
                ),
                (
                    "side_effect, redis-server: a repeat",
                    await per_call(folder, side_effect=True, redis_url=redis.url, distinct=False),
                ),
            ]
        finally:
            redis.kill()
    title = "the repeat check, per call (in-process; best of 5 x 2,000)"
    print(f"{title:<50} {'us':>7} {'x base':>7} {'redis fails':>12}")
    for label, (micros, failed) in rows:
        print(f"{label:<50} {micros:>7.1f} {micros / baseline[0]:>7.2f} {failed:>12}")


if __name__ == "__main__":
    asyncio.run(main())
