"""What the decision log costs a call, in-process: the process's CPU per validate() with the log off and on.

Two gateways in one process, one without the log and one with it, judge the
same call in alternating rounds. Each round's figure is the process's CPU time
(every thread, user and system: the event loop's validate and its line, and the
writer thread's writing and packing) over the round, once the writer has
written every line of it, divided by the calls. The added cost is the median
of the rounds' differences, against the goal of 10 us; off, validate is the
class's own method (not wrapped), so nothing is added by construction. The
machine's speed swings within minutes: the figure to read against the goal is
the ratio to validate's own cost in the same run, printed beside it.

    python bench/decision_log.py [--rounds 9] [--calls 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import statistics
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import bench_settings
from validate import payload

from argwatch.server.decisions.record import LineBuilder, ValueHasher
from argwatch.server.decisions.value_plan import ValuePlan, value_plans
from argwatch.server.decisions.writer import DecisionLogWriter
from argwatch.server.edge import wire
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.process.settings import Settings
from argwatch.server.validator import Validator
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import gateway_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
GOAL_MICROS = 10.0


def varied_calls(count: int) -> list[ToolCall]:
    """refund_order calls as traffic varies them: every call its own call id, order id and note; amounts,
    customers and conversations from a few hundred; the reason codes and the tenant shared. Decoded in
    advance: the figure is the verdict's and the log's, not the wire's."""
    base = gateway_pb2.ValidateRequest.FromString(payload())
    calls = []
    for n in range(count):
        message = gateway_pb2.ValidateRequest()
        message.CopyFrom(base)
        message.call_id = f"call-{n:08d}-{n * 7919 % 100_003:06d}"
        message.conversation_id = f"conv-{n % 500:04d}"
        message.session.customer_id = f"cus_{n % 300:06d}"
        message.arguments_json = orjson.dumps(
            {
                "order_id": f"ord_{n * 104_729 % 10_000_000:010d}",
                "reason_code": "DAMAGED_ITEM",
                "amount_cents": 100 * (n % 400),
                "note": f"Customer {n % 300} reports the box arrived crushed (ticket {n}).",
            }
        )
        calls.append(wire.call_from_request(message))
    return calls


def logged_settings(policy: str, folder: str) -> Settings:
    """The bench's gateway with the decision log on in `folder`."""
    return dataclasses.replace(
        bench_settings(policy),
        decision_log=folder,
        decision_log_queue=100_000,
        # Rotating every MiB on disk (about 8,700 of these lines, packed): the bench's rounds end frames, fsync
        # and rename files as a long-running log does; at the default 64 MiB no file would rotate within it.
        decision_log_rotate_bytes=1 << 20,
        decision_log_max_bytes=1 << 30,
    )


async def cpu_micros(gateway: RunningGateway, calls: list[ToolCall]) -> float:
    """The process's CPU per call over `calls`, the decision log's writer caught up."""
    writer = gateway.decisions if isinstance(gateway.decisions, DecisionLogWriter) else None
    target = (writer.written + len(calls)) if writer is not None else 0
    validate = gateway.validator.validate
    started = time.process_time()
    for call in calls:
        await validate(call)
    caught_up(writer, target)
    return (time.process_time() - started) / len(calls) * 1e6


def caught_up(writer: DecisionLogWriter | None, target: int) -> None:
    """Waits for the writer to have written `target` lines, blocking the loop: an asyncio sleep would run the
    gateways' periodic tasks, and the loop's own polling, in the rounds with the log only, counted against it."""
    if writer is None:
        return
    writer.write_now()  # its batch is due now, not at its next tick
    while writer.written < target:
        time.sleep(0.0005)  # the GIL released: the writer's thread runs; this thread's CPU idles


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=4_000)
    args = parser.parse_args()
    policy = os.path.join(HERE, "policy.yaml")
    with tempfile.TemporaryDirectory(prefix="argwatch-decisions-") as folder:
        off = await build_gateway(bench_settings(policy))
        on = await build_gateway(logged_settings(policy, folder))
        try:
            unwrapped = off.validator.validate.__func__ is Validator.validate  # type: ignore[attr-defined]
            calls = varied_calls(args.calls)
            for gateway in (off, on):  # warm both
                await cpu_micros(gateway, calls[:500])
            gc.collect()
            offs, ons = [], []
            for _ in range(args.rounds):  # alternating: the CPU's speed drifts over minutes
                offs.append(await cpu_micros(off, calls))
                ons.append(await cpu_micros(on, calls))
            added = statistics.median(b - a for a, b in zip(offs, ons, strict=True))
            parts = await where_it_goes(off, on, calls)
            writer = on.decisions
            assert isinstance(writer, DecisionLogWriter)
            written = writer.written
            size = sum(entry.stat().st_size for entry in os.scandir(folder) if entry.name.startswith("decisions"))
        finally:
            await off.stop(0)
            await on.stop(0)
    print(f"decision log, process CPU per validate() ({args.rounds} alternating rounds of {args.calls} calls)")
    print(f"  off (validate not wrapped: {unwrapped})   median {statistics.median(offs):6.1f} us  {_range(offs)}")
    print(f"  on  (loop + writer thread)          median {statistics.median(ons):6.1f} us  {_range(ons)}")
    verdict = "within" if added <= GOAL_MICROS else "OVER"
    print(f"  added by the log: median {added:.1f} us a call (goal <= {GOAL_MICROS:g} us: {verdict})")
    print(
        f"  ratio on/off: {statistics.median(ons) / statistics.median(offs):.2f}; added / validate's own cost: "
        f"{added / statistics.median(offs):.2f}"
    )
    print(f"  lines written: {written}, {size / max(written, 1):.0f} bytes a line on disk (most of them packed)")
    print("where it goes, each part alone on one thread (best of 5: noise only adds):")
    for name, micros in parts:
        print(f"  {name:<58} {micros:6.1f} us a call")


async def where_it_goes(off: RunningGateway, on: RunningGateway, calls: list[ToolCall]) -> list[tuple[str, float]]:
    """The loop's share (validate with the log, its writer held, against validate without), and the writer's
    (a line built, with its values hashed and with none written), each timed alone."""
    writer = on.decisions
    assert isinstance(writer, DecisionLogWriter)

    async def loop_micros(gateway: RunningGateway) -> float:
        best = float("inf")
        for _ in range(5):
            validate = gateway.validator.validate
            target = writer.written + (len(calls) if gateway is on else 0)
            with writer.held():
                started = time.process_time()
                for call in calls:
                    await validate(call)
                best = min(best, time.process_time() - started)
            caught_up(writer, target)
        return best / len(calls) * 1e6

    async def writer_micros() -> float:
        """The writer's thread's own CPU per line, measured in place (writing, rotating, packing)."""
        validate = on.validator.validate
        best = float("inf")
        for _ in range(5):
            target = writer.written + len(calls)
            busy = writer.busy_seconds
            for call in calls:
                await validate(call)
            caught_up(writer, target)
            best = min(best, writer.busy_seconds - busy)
        return best / len(calls) * 1e6

    verdicts = [await off.validator.validate(call) for call in calls]
    plans, unknown = value_plans(on.policy)
    plan = plans.get(calls[0].tool, unknown)
    document = on.modes.document

    def line_micros(chosen: ValuePlan) -> float:
        best = float("inf")
        for _ in range(5):
            builder = LineBuilder(ValueHasher(b"k" * 64))
            started = time.process_time()
            for call, verdict in zip(calls, verdicts, strict=True):
                builder.line(0, call, verdict, document, 0, chosen)
            best = min(best, time.process_time() - started)
        return best / len(calls) * 1e6

    base = await loop_micros(off)
    logged = await loop_micros(on)
    hashed = line_micros(plan)
    written = await writer_micros()
    return [
        ("validate alone (no log)", base),
        ("on the loop: the wrapper, two clocks, the line, the queue", logged - base),
        ("  of which the line: its 4 values and session hashed", hashed),
        ("the writer's thread: writing, rotating, packing (in place)", written),
    ]


def _range(values: list[float]) -> str:
    return f"[{min(values):.1f}-{max(values):.1f}]"


if __name__ == "__main__":
    asyncio.run(main())
