"""How the check's cost grows: per-call microseconds as tools, arguments per call and set size grow, in-process.

Each row builds a real gateway (build_gateway) on a generated policy whose
sets stream from an in-process ValueSetSource, then times the Validator on one
decoded call (no RPC): the best of 5 runs of 2,000 calls, after a warm-up. Membership is a hash
look-up, so the figures should stay flat in the number of tools and the size
of sets, and grow with the arguments a call carries (each one is checked).
A miss (a value not in its set) also classifies why it missed; that is timed too.

    .venv/bin/python bench/growth.py
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import bench_settings
from timing import best_micros

from argwatch.server.policy.loader import parse_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.sources import ValueSetCatalog
from tests.conftest import start_source

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = 2_000
REPEATS = 5


def policy_text(target: str, tools: int, arguments: int) -> str:
    lines = [
        "default_mode: observe",
        "sampling: {rate: 0.0}",
        f'sources: {{owners: {{grpc: {{target: "{target}", timeout: 30s}}}}}}',
        "value_sets:",
    ]
    lines += [f"  set{a}: {{source: owners, ttl: 1h}}" for a in range(arguments)]
    lines.append("tools:")
    for t in range(tools):
        lines += [f"  tool{t}:", "    arguments:"]
        lines += [f"      arg{a}: {{value_set: set{a}}}" for a in range(arguments)]
    return "\n".join(lines) + "\n"


def write(path: str, text: str) -> str:
    with open(path, "w") as handle:
        handle.write(text)
    return path


async def per_call(tools: int, arguments: int, members: int, miss: bool = False) -> float:
    catalog = ValueSetCatalog()
    for a in range(arguments):
        catalog.publish(f"set{a}", [f"VALUE_{a}_{m:07d}" for m in range(members)])
    source = await start_source(catalog)
    try:
        with tempfile.TemporaryDirectory() as folder:
            text = policy_text(source.target, tools, arguments)
            path = write(os.path.join(folder, "policy.yaml"), text)
            # A 1M-member set takes seconds to arrive: wait for it rather than serve without it.
            settings = replace(bench_settings(path), startup_timeout_seconds=120.0)
            gateway = await build_gateway(settings, policy=parse_policy(text.encode(), path))
        try:
            values = {f"arg{a}": f"VALUE_{a}_{members // 2:07d}" for a in range(arguments)}
            if miss:
                values["arg0"] = "INVENTED_VALUE"
            call = ToolCall(f"tool{tools // 2}", values, "call-1")
            for _ in range(500):
                await gateway.validator.validate(call)
            gc.collect()
            return await best_micros(lambda: gateway.validator.validate(call), CALLS, REPEATS)
        finally:
            await gateway.stop(0)
    finally:
        await source.stop()


async def main(out: str) -> None:
    logging.disable(logging.WARNING)
    rows: list[tuple[str, str, float]] = []

    async def row(axis: str, label: str, **kwargs: int | bool) -> None:
        micros = await per_call(**kwargs)  # type: ignore[arg-type]
        rows.append((axis, label, micros))
        print(f"{axis:<22} {label:<28} {micros:>8.1f} us", flush=True)

    print(f"{'grows':<22} {'':<28} {'per call':>11}")
    for tools in (10, 100, 1000):
        await row("tools", f"{tools} tools, 4 args, 1k members", tools=tools, arguments=4, members=1000)
    for arguments in (1, 4, 16):
        await row("arguments per call", f"{arguments} args", tools=10, arguments=arguments, members=1000)
    for members in (10, 1000, 100_000, 1_000_000):
        await row("set size (hit)", f"{members:,} members, 4 args", tools=10, arguments=4, members=members)
    for members in (10, 1_000_000):
        await row(
            "set size (one miss)", f"{members:,} members, 4 args", tools=10, arguments=4, members=members, miss=True
        )
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, time.strftime("growth-%Y%m%dT%H%M%S.json"))
    record = {"python": platform.python_version(), "calls": CALLS, "repeats": REPEATS, "rows": rows}
    write(path, json.dumps(record, indent=2))
    print(f"written: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    asyncio.run(main(parser.parse_args().out))
