"""The checker's read of a set: the reading it keeps is handed out only while fresh and current, and any change
to the set's state (a new copy, a confirmation, the source lost, a reload's carry-over) is seen on the next read."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import json
import sys
import textwrap
from types import FrameType
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.policytest.case_sources import CaseSets
from argwatch.server.sets.payload import SetPayload
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.valuesets.set_state import _READING_MADE_OF, SetState
from argwatch.server.valuesets.set_table import SetTable

POLICY = {
    "sources": {"owner": {"grpc": {"target": "127.0.0.1:1", "timeout": "1s"}}},
    "value_sets": {"codes": {"source": "owner", "ttl": "30s", "max_staleness": "10m"}},
    "tools": {"t": {"arguments": {"code": {"value_set": "codes"}}}},
}


def started(clock: list[float]) -> tuple[ValueSetProvider, asyncio.AbstractEventLoop]:
    policy = parse_policy(json.dumps(POLICY).encode(), "/srv/policy.yaml")
    metrics = GatewayMetrics(CollectorRegistry())
    sets = CaseSets({"codes": SetPayload("codes", 1, ["A", "B"])})
    provider = ValueSetProvider(
        policy, {"owner": sets}, SharedCache(None, metrics), metrics, monotonic=lambda: clock[0]
    )
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(provider.start(5.0)) == []
    return provider, loop


def test_a_kept_reading_lasts_while_fresh_and_no_longer() -> None:
    clock = [1000.0]
    provider, loop = started(clock)
    try:
        first = provider.read("codes")
        assert first is not None and not first.stale
        clock[0] += 29.9
        assert provider.read("codes") is first  # kept, not built again per call
        clock[0] += 0.2  # past the TTL: stale, with no event in between
        later = provider.read("codes")
        assert later is not None and later.stale
        clock[0] += 600  # past max_staleness: unavailable
        assert provider.read("codes") is None
    finally:
        loop.run_until_complete(provider.close())
        loop.close()


def test_any_change_to_the_state_is_read_at_once() -> None:
    clock = [1000.0]
    provider, loop = started(clock)
    table = provider._table
    state = table.states["codes"]
    try:
        assert provider.read("codes") is not None and not provider.read("codes").stale  # type: ignore[union-attr]
        table.mark_unreachable(state, "connection refused")  # within the TTL: stale from the next read
        reading = provider.read("codes")
        assert reading is not None and reading.stale
        table.confirm(state)
        reading = provider.read("codes")
        assert reading is not None and not reading.stale
        assert state.snapshot is not None
        newer = dataclasses.replace(state.snapshot, version=2)
        state.snapshot = newer
        reading = provider.read("codes")
        assert reading is not None and reading.snapshot is newer
        table.confirm(state, confirmed_at=reading.confirmed_at - 3600)  # vouched for an hour ago: too old
        assert provider.read("codes") is None
    finally:
        loop.run_until_complete(provider.close())
        loop.close()


def test_every_field_a_reading_is_made_of_ends_what_is_kept() -> None:
    clock = [1000.0]
    provider, loop = started(clock)
    state = provider._table.states["codes"]
    try:
        for name in sorted(_READING_MADE_OF):
            kept = provider.read("codes")
            assert state.kept is not None and state.kept[0] == state.generation
            setattr(state, name, getattr(state, name))  # even the same value: a write is a change
            assert state.kept[0] != state.generation, name
            assert provider.read("codes") == kept  # made again, equal: nothing changed but the count
        generation = state.generation
        state.transport_error = "not a part of the reading"
        assert state.generation == generation
    finally:
        loop.run_until_complete(provider.close())
        loop.close()


def test_what_the_read_reads_of_a_state_is_what_ends_a_kept_reading() -> None:
    """The fields SetTable.read reads of `state` are _READING_MADE_OF and its own bookkeeping, no more: a field
    it started to read that writes did not count would leave a reading handed out after that field changed."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(SetTable.read)))
    read = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "state"
    }
    assert read - {"kept", "generation", "reading"} == _READING_MADE_OF
    assert {field.name for field in dataclasses.fields(SetState)} >= _READING_MADE_OF


def _line_of(function: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return next(number for number, line in enumerate(lines, first) if text in line)


@pytest.mark.parametrize("write", ["a new copy", "the source lost"])
def test_a_read_on_another_thread_that_a_write_overtakes_keeps_nothing_stale(write: str) -> None:
    """A /metrics render reads every set on its own thread (SetTable.health). When the loop writes to the
    set's state after that read looked at the fields and before it kept its reading, the checker's next read
    is of the state as written, not the render's reading. The switch of threads is made with a line trace."""
    keep_line = _line_of(SetTable.read, "state.kept = ")
    clock = [1000.0]
    provider, loop = started(clock)
    table = provider._table
    state = table.states["codes"]
    try:
        clock[0] += 31  # past the TTL, then confirmed again: the render's read makes a fresh reading
        table.confirm(state)
        assert state.snapshot is not None
        newer = dataclasses.replace(state.snapshot, version=2, members=frozenset({"A", "B", "C"}))
        wrote: list[str] = []

        def loop_writes() -> None:
            if write == "a new copy":
                table.swap_in(state, newer, save=False)
            else:
                table.mark_unreachable(state, "connection refused")
            wrote.append(write)

        def line(frame: FrameType, event: str, arg: object) -> Any:
            if event == "line" and frame.f_lineno == keep_line and not wrote:
                loop_writes()
            return line

        sys.settrace(lambda frame, event, arg: line if frame.f_code is SetTable.read.__code__ else None)
        try:
            table.health()
        finally:
            sys.settrace(None)
        assert wrote == [write]
        for _ in range(2):
            reading = provider.read("codes")
            assert reading is not None and reading.snapshot is state.snapshot
            assert reading.stale is (write == "the source lost")
            clock[0] += 20  # within the TTL of the confirmation
    finally:
        loop.run_until_complete(provider.close())
        loop.close()
