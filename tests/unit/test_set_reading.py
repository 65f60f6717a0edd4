"""The checker's read of a set: the reading it keeps is handed out only while fresh and current, and any change
to the set's state (a new copy, a confirmation, the source lost, a reload's carry-over) is seen on the next read."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.policytest.case_sources import CaseSets
from argwatch.server.sets.payload import SetPayload
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.valuesets.set_state import _READING_MADE_OF, SetState

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


def test_every_field_a_reading_is_made_of_resets_its_freshness() -> None:
    made_of = {field.name for field in dataclasses.fields(SetState)} & _READING_MADE_OF
    assert made_of == _READING_MADE_OF  # no name in it that is not a field (a typo would never reset)
    clock = [1000.0]
    provider, loop = started(clock)
    state = provider._table.states["codes"]
    try:
        for name in sorted(_READING_MADE_OF):
            provider.read("codes")
            assert state.fresh_until > clock[0]
            setattr(state, name, getattr(state, name))  # even the same value: a write is a change
            assert state.fresh_until < clock[0], name
        provider.read("codes")
        state.transport_error = "not a part of the reading"
        assert state.fresh_until > clock[0]
    finally:
        loop.run_until_complete(provider.close())
        loop.close()
