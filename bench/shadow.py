"""What a shadow policy costs Validate: CPU per call without one, with one, and after one was cleared, in-process.

Four gateways in one process on the benchmark's policy (bench/policy.yaml):
none has a shadow; one has a shadow that judges every call as the live policy
does (the usual case: a shadow differs on few calls); one has a shadow that
refuses what the live policy observes (half the calls differ, each tallied
with an example: the worst case); one had a shadow and had it cleared (its
Validate must cost what no shadow costs: the wrapper is unbound, not
branched around). Calls go straight to
`validator.validate`, in batches of 64 (the shadow's tasks of a batch are run
to the end before the batch's time is taken, so their CPU is counted), half
with a legal reason code, half not. The three alternate batch by batch, and
the process's own CPU time is read around each batch; a side's figure is the
median of its batches, the ratio the median of adjacent batches' ratios.

    python bench/shadow.py                 # 20 s
    python bench/shadow.py --seconds 5     # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_server import bench_settings

from argwatch.server.edge import wire
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import gateway_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 64


def calls() -> Iterator[ToolCall]:
    """refund_order calls, every other one with a reason code out of the set."""
    index = 0
    while True:
        code = "DAMAGED_ITEM" if index % 2 == 0 else "damaged-item-typo"
        request = gateway_pb2.ValidateRequest(
            tool="refund_order",
            arguments_json=orjson.dumps({"order_id": f"ord_{index}", "reason_code": code, "amount_cents": 1200}),
            conversation_id="conv-bench",
            call_id=f"call-{index}",
            session=gateway_pb2.Session(customer_id="cus_000123", tenant="acme"),
        )
        yield wire.call_from_request(request)
        index += 1


async def batch_cpu(gateway: RunningGateway, supply: Iterator[ToolCall]) -> float:
    """The process's CPU microseconds per call over one batch, the shadow's work in it included."""
    started = time.process_time()
    validate = gateway.validator.validate
    for _ in range(BATCH):
        await validate(next(supply))
    if gateway.shadow is not None:
        await gateway.shadow.runner.drained()
    return (time.process_time() - started) / BATCH * 1e6


async def main(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name in ("policy.yaml", "value_sets.yaml"):
            shutil.copy(os.path.join(HERE, name), folder)
        path = os.path.join(folder, "policy.yaml")
        with open(path) as handle:  # noqa: ASYNC230 (set-up, before anything runs)
            text = handle.read()
        shadow_path = os.path.join(folder, "shadow.yaml")
        with open(shadow_path, "w") as handle:  # noqa: ASYNC230
            handle.write(text.replace("default_mode: observe", "default_mode: reject"))
        same_path = os.path.join(folder, "same.yaml")
        with open(same_path, "w") as handle:  # noqa: ASYNC230 (another version, the same verdicts)
            handle.write(text + "\n# the shadow\n")
        plain = await build_gateway(bench_settings(path))
        agreeing = await build_gateway(bench_settings(path))
        shadowed = await build_gateway(bench_settings(path))
        cleared = await build_gateway(bench_settings(path))
        try:
            assert agreeing.shadow is not None and shadowed.shadow is not None and cleared.shadow is not None
            await agreeing.shadow.set_file(same_path, "bench", "bench")
            await shadowed.shadow.set_file(shadow_path, "bench", "bench")
            await cleared.shadow.set_file(shadow_path, "bench", "bench")
            await cleared.shadow.clear("bench", "bench")
            sides = {
                "no shadow": plain,
                "shadow, agrees": agreeing,
                "shadow, half differ": shadowed,
                "shadow cleared": cleared,
            }
            figures: dict[str, list[float]] = {name: [] for name in sides}
            supplies = {name: calls() for name in sides}
            for name, gateway in sides.items():  # warm each
                for _ in range(10):
                    await batch_cpu(gateway, supplies[name])
            gc.collect()
            gc.disable()  # a collection lands on whichever side runs then: left out of every side alike
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for name, gateway in sides.items():
                    figures[name].append(await batch_cpu(gateway, supplies[name]))
                gc.enable()
                gc.collect()
                gc.disable()
            gc.enable()
            report = shadowed.shadow.report()
            assert report is not None
        finally:
            for gateway in (plain, agreeing, shadowed, cleared):
                await gateway.stop(0)
    print(f"Validate CPU per call, in-process, {len(figures['no shadow'])} alternating batches of {BATCH}")
    print(f"{'side':<20} {'us/call':>8} {'x none (median of pairs)':>26}")
    for name, values in figures.items():
        pairs = [b / a for a, b in zip(figures["no shadow"], values, strict=True)]
        print(f"{name:<20} {statistics.median(values):>8.1f} {statistics.median(pairs):>26.2f}")
    differing = sum(row.count for row in report.rows)
    print(f"(the half-differing shadow judged {report.calls} calls, {differing} differently; {report.busy} busy,")
    print(f" {report.raised} raised)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    asyncio.run(main(parser.parse_args().seconds))
