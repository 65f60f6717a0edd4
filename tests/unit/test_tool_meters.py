"""A reload's tool meters are built in turns of the loop, and are the very children a build in one pass gives."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.validator import tool_meters as module
from argwatch.server.validator.tool_meters import tool_meters, tool_meters_in_turns

TOOLS = 25


def _policy() -> bytes:
    lines = [
        "sources:",
        "  local: {file: sets.yaml}",
        "value_sets:",
        "  codes: {source: local}",
        "tools:",
    ]
    for index in range(TOOLS):
        lines += [f"  tool_{index}:", "    arguments:", "      code: {value_set: codes}"]
    return ("\n".join(lines) + "\n").encode()


async def test_in_turns_the_loop_runs_between_and_the_children_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "TOOLS_PER_TURN", 10)
    policy = parse_policy(_policy(), "/tmp/policy.yaml")
    metrics = GatewayMetrics(CollectorRegistry())
    ticks = [0]

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    meters = await tool_meters_in_turns(policy, metrics)
    ticking.cancel()
    assert ticks[0] >= 3  # 25 tools, 10 a turn: the loop ran other work twice while they were built
    assert list(meters) == list(policy.tools)
    at_once = tool_meters(policy, metrics)
    assert all(at_once[name] is meters[name] for name in policy.tools)  # reused, not made again
