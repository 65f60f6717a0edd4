"""Live value sets against real sources: watch, deltas, resync, staleness, fail-open, pull fallback, files."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from collections.abc import Set as AbstractSet

import pytest
from aiocache import SimpleMemoryCache
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.process.app import make_fetcher
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.grpc_source import GrpcSetFetcher
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.v1 import sources_pb2
from tests.conftest import SourceServer, make_policy, start_source
from tests.service.helpers import value
from tests.service.scripted_source import ScriptedSource, serve


async def until(condition, seconds: float = 10.0) -> None:
    """Polls a plain condition every 20 ms until it holds, for at most `seconds`."""
    import asyncio
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition did not hold within {seconds}s")
        await asyncio.sleep(0.02)


def provider_for(policy, registry: CollectorRegistry) -> ValueSetProvider:
    return ValueSetProvider(
        policy,
        {name: make_fetcher(config) for name, config in policy.sources.items()},
        SimpleMemoryCache(timeout=None),
        GatewayMetrics(registry),
        backoff_cap=0.2,
        watch_idle_seconds=2.0,
    )


@pytest.fixture
async def live(tmp_path, source: SourceServer) -> AsyncIterator[tuple[ValueSetProvider, CollectorRegistry]]:
    registry = CollectorRegistry()
    provider = provider_for(make_policy(str(tmp_path), source.target, ttl="2s", max_staleness="1h"), registry)
    assert await provider.start(5.0) == []
    yield provider, registry
    await provider.close()


def members(provider: ValueSetProvider, name: str) -> AbstractSet[str]:
    reading = provider.read(name)
    return reading.snapshot.members if reading is not None else frozenset()


async def test_a_value_added_at_the_source_is_accepted_shortly_after(live, source: SourceServer) -> None:
    provider, registry = live
    source.catalog.publish(
        "refunds.reason_codes", ["DAMAGED_ITEM", "NOT_RECEIVED", "WRONG_ITEM", "LATE_DELIVERY", "PRICE_MATCH"]
    )
    await until(lambda: "PRICE_MATCH" in members(provider, "refunds.reason_codes"))
    reading = provider.read("refunds.reason_codes")
    assert reading is not None and reading.snapshot.version == 2 and not reading.stale
    # A delta, not a refetch: no resync was needed.
    assert value(registry, "argwatch_value_set_resync_total", set="refunds.reason_codes", reason="version_gap") == 0


async def test_removed_values_become_retired_with_when(live, source: SourceServer) -> None:
    provider, _ = live
    source.catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "NOT_RECEIVED", "WRONG_ITEM"])
    await until(lambda: "LATE_DELIVERY" not in members(provider, "refunds.reason_codes"))
    snapshot = provider.read("refunds.reason_codes").snapshot
    assert "LATE_DELIVERY" in snapshot.retired
    assert snapshot.retirements["LATE_DELIVERY"].retired_at is not None


async def test_the_source_killed_mid_stream_keeps_the_last_good_set_stale_then_reconnect_resyncs(
    tmp_path,
    live,
    source: SourceServer,
) -> None:
    provider, registry = live
    await source.stop()
    await until(lambda: provider.read("refunds.reason_codes").stale)
    reading = provider.read("refunds.reason_codes")
    assert reading is not None and "DAMAGED_ITEM" in reading.snapshot.members  # still checked against
    assert value(registry, "argwatch_source_connected", source="owners") == 0
    assert value(registry, "argwatch_value_set_stale", set="refunds.reason_codes") == 1
    first_age = value(registry, "argwatch_value_set_age_seconds", set="refunds.reason_codes")
    await until(lambda: value(registry, "argwatch_value_set_age_seconds", set="refunds.reason_codes") > first_age)

    # The owner comes back on the same port, with a change made while we were away.
    source.catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WHILE_AWAY"])
    restarted = await start_source(source.catalog, port=source.port)
    try:
        await until(lambda: "WHILE_AWAY" in members(provider, "refunds.reason_codes"))
        assert not provider.read("refunds.reason_codes").stale
        assert value(registry, "argwatch_source_connected", source="owners") == 1
        assert value(registry, "argwatch_value_set_stale", set="refunds.reason_codes") == 0
    finally:
        await restarted.stop()


async def test_past_max_staleness_the_set_is_unavailable(tmp_path, source: SourceServer) -> None:
    registry = CollectorRegistry()
    provider = provider_for(make_policy(str(tmp_path), source.target, ttl="200ms", max_staleness="500ms"), registry)
    try:
        await provider.start(5.0)
        await source.stop()
        await until(lambda: provider.read("refunds.reason_codes") is None)
        assert value(registry, "argwatch_value_set_available", set="refunds.reason_codes") == 0
        (status,) = [s for s in provider.statuses() if s.config.name == "refunds.reason_codes"]
        assert not status.available and status.stale and "UNAVAILABLE" in status.last_error
    finally:
        await provider.close()


def scripted_policy(tmp_path, target: str, *, watch: bool = True):
    text = (
        f'sources: {{owner: {{grpc: {{target: "{target}", timeout: 500ms, watch: {str(watch).lower()}}}}}}}\n'
        "value_sets: {s.codes: {source: owner, ttl: 1h, max_members: 5}}\n"
        "tools: {t: {arguments: {a: {value_set: s.codes}}}}\n"
    )
    return parse_policy(text.encode(), os.path.join(str(tmp_path), "p.yaml"))


def codes(version: int, *members: str) -> sources_pb2.ValueSet:
    return sources_pb2.ValueSet(name="s.codes", version=version, members=members)


async def test_malformed_updates_are_rejected_counted_and_the_last_good_set_kept(tmp_path) -> None:
    scripted = ScriptedSource({"s.codes": codes(5, "A", "B")})
    server, target = await serve(scripted)
    registry = CollectorRegistry()
    provider = provider_for(scripted_policy(tmp_path, target), registry)
    try:
        await provider.start(5.0)
        scripted.send_snapshot(codes(4, "OLD"))  # version going backwards
        scripted.send_delta("s.codes", 5, 5, added=["X"])  # to_version not after from_version
        scripted.send_snapshot(codes(6, "1", "2", "3", "4", "5", "6"))  # over max_members (5)
        scripted.send_delta("", 5, 6, added=["X"])  # no name
        scripted.send_delta("s.codes", 5, 6, added=["C"])  # a good one, last
        await until(lambda: "C" in members(provider, "s.codes"))
        assert members(provider, "s.codes") == {"A", "B", "C"}
        rejected = {
            reason: value(registry, "argwatch_value_set_update_rejected_total", set=name, reason=reason)
            for name, reason in [("s.codes", "version_order"), ("s.codes", "oversized"), ("_unknown", "empty_name")]
        }
        assert rejected == {"version_order": 2, "oversized": 1, "empty_name": 1}
    finally:
        await provider.close()
        await server.stop(0)


async def test_a_version_gap_triggers_a_full_resync(tmp_path) -> None:
    scripted = ScriptedSource({"s.codes": codes(5, "A", "B")})
    server, target = await serve(scripted)
    registry = CollectorRegistry()
    provider = provider_for(scripted_policy(tmp_path, target), registry)
    try:
        await provider.start(5.0)
        fetches = scripted.fetches
        scripted.sets["s.codes"] = codes(8, "A", "B", "C", "D")  # versions 6 and 7 never reached us
        scripted.send_delta("s.codes", 7, 8, added=["D"])
        await until(lambda: members(provider, "s.codes") == {"A", "B", "C", "D"})
        assert scripted.fetches == fetches + 1
        assert value(registry, "argwatch_value_set_resync_total", set="s.codes", reason="version_gap") == 1
    finally:
        await provider.close()
        await server.stop(0)


async def test_a_source_that_cannot_stream_is_pulled_instead(tmp_path) -> None:
    scripted = ScriptedSource({"s.codes": codes(1, "A")}, can_watch=False)
    server, target = await serve(scripted)
    registry = CollectorRegistry()
    provider = provider_for(scripted_policy(tmp_path, target), registry)
    try:
        assert await provider.start(5.0) == []
        assert members(provider, "s.codes") == {"A"}
        assert scripted.fetches == 1 and scripted.watchers == 0
        assert value(registry, "argwatch_source_connected", source="owner") == 1
    finally:
        await provider.close()
        await server.stop(0)


async def test_start_up_waits_a_bounded_time_for_a_down_source_and_says_which_sets(tmp_path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    registry = CollectorRegistry()
    provider = provider_for(scripted_policy(tmp_path, f"127.0.0.1:{port}"), registry)
    try:
        assert await provider.start(0.5) == ["s.codes"]
        assert value(registry, "argwatch_value_set_available", set="s.codes") == 0
        # The source appears later: the set loads without a restart.
        scripted = ScriptedSource({"s.codes": codes(1, "LATE")})
        server = __import__("grpc").aio.server()
        from argwatch.v1 import sources_pb2_grpc

        sources_pb2_grpc.add_ValueSetSourceServicer_to_server(scripted, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        try:
            await until(lambda: members(provider, "s.codes") == {"LATE"})
        finally:
            await server.stop(0)
    finally:
        await provider.close()


async def test_an_edited_file_is_reloaded(tmp_path, source: SourceServer) -> None:
    registry = CollectorRegistry()
    provider = provider_for(make_policy(str(tmp_path), source.target), registry)
    try:
        await provider.start(5.0)
        assert members(provider, "wms.warehouses") == {"AMS-1", "BER-1", "LHR-3"}
        sets = tmp_path / "sets.yaml"
        sets.write_text("wms.warehouses:\n  version: 4\n  members: [AMS-1, BER-1, LHR-3, WAW-9]\n")
        await until(lambda: "WAW-9" in members(provider, "wms.warehouses"))
    finally:
        await provider.close()


async def test_a_large_snapshot_sent_in_parts_arrives_whole(tmp_path, source: SourceServer) -> None:
    from argwatch.sources import PART_MEMBERS

    registry = CollectorRegistry()
    provider = provider_for(make_policy(str(tmp_path), source.target), registry)
    try:
        await provider.start(5.0)
        handles = [f"user{i:07d}" for i in range(2 * PART_MEMBERS + 1)]  # three parts
        source.catalog.publish("identity.handles", handles)  # a change: sent as a delta
        await until(lambda: len(members(provider, "identity.handles")) == len(handles), seconds=30)
        # A reconnect re-sends the whole set as a snapshot, in parts this time.
        await source.stop()
        await until(lambda: provider.read("identity.handles").stale)  # type: ignore[union-attr]
        source.catalog.publish("identity.handles", [*handles, "user-late"])
        restarted = await start_source(source.catalog, port=source.port)
        try:
            await until(lambda: "user-late" in members(provider, "identity.handles"), seconds=30)
            assert len(members(provider, "identity.handles")) == len(handles) + 1
        finally:
            await restarted.stop()
    finally:
        await provider.close()


async def test_a_snapshot_sent_in_parts_is_let_go_once_handed_over(tmp_path, source: SourceServer) -> None:
    """The parts are the set's whole wire copy (~66 bytes a member): held after the hand-over,
    a million-member set cost its size twice until the next snapshot (found by bench/memory.py)."""
    from argwatch.server.sets.payload import SnapshotUpdate
    from argwatch.sources import PART_MEMBERS

    source.catalog.publish("identity.handles", [f"user{i:07d}" for i in range(2 * PART_MEMBERS + 1)])
    policy = make_policy(str(tmp_path), source.target)
    fetcher = make_fetcher(policy.sources["owners"])
    assert isinstance(fetcher, GrpcSetFetcher)
    stream = fetcher.watch(["identity.handles"])
    try:
        update = await anext(stream)
        while not isinstance(update, SnapshotUpdate) or update.payload.name != "identity.handles":
            update = await anext(stream)
        assert len(update.payload.members) == 2 * PART_MEMBERS + 1
        del update
        await anext(stream)  # the next update (a heartbeat): the stream has moved on
        frame = stream.ag_frame  # type: ignore[attr-defined]
        assert frame.f_locals["whole"] is None
        assert frame.f_locals["assembler"]._gathering == {}
    finally:
        await stream.aclose()
        await fetcher.close()


async def test_a_restart_with_the_source_down_serves_the_saved_copy_as_stale(tmp_path, source: SourceServer) -> None:
    saved = tmp_path / "snapshots"
    policy = make_policy(str(tmp_path), source.target, ttl="1s", max_staleness="1h")
    first = ValueSetProvider(
        policy,
        {n: make_fetcher(c) for n, c in policy.sources.items()},
        SimpleMemoryCache(timeout=None),
        GatewayMetrics(CollectorRegistry()),
        snapshot_dir=str(saved),
    )
    await first.start(5.0)
    await until(lambda: (saved / "refunds.reason_codes.json").exists())
    await first.close()
    await source.stop()  # the owner is down when the gateway restarts

    registry = CollectorRegistry()
    second = ValueSetProvider(
        policy,
        {n: make_fetcher(c) for n, c in policy.sources.items()},
        SimpleMemoryCache(timeout=None),
        GatewayMetrics(registry),
        snapshot_dir=str(saved),
        backoff_cap=0.2,
    )
    try:
        missing = await second.start(1.0)
        assert "refunds.reason_codes" not in missing
        reading = second.read("refunds.reason_codes")
        assert reading is not None and reading.stale and "DAMAGED_ITEM" in reading.snapshot.members
        assert value(registry, "argwatch_value_set_available", set="refunds.reason_codes") == 1
        assert value(registry, "argwatch_value_set_stale", set="refunds.reason_codes") == 1
    finally:
        await second.close()


async def test_an_unreadable_saved_copy_is_ignored_with_a_warning(tmp_path, caplog) -> None:
    from argwatch.server.valuesets import persist

    (tmp_path / "s.codes.json").write_text("{not json")
    assert persist.load(str(tmp_path), "s.codes") is None
    assert "ignoring the saved copy" in caplog.text
