"""The value-set provider against real sources: refresh, expiry, single-flight loads and the negative cache."""

from __future__ import annotations

import asyncio

from aiocache import SimpleMemoryCache
from prometheus_client import CollectorRegistry

from argwatch.server.app import make_fetcher
from argwatch.server.metrics import GatewayMetrics
from argwatch.server.valuesets.provider import ValueSetProvider
from tests.conftest import SourceServer, make_policy
from tests.service.helpers import eventually, value


async def start_provider(tmp_path, source: SourceServer, ttl: str = "5m"):  # type: ignore[no-untyped-def]
    policy = make_policy(str(tmp_path), source.target, ttl=ttl)
    registry = CollectorRegistry()
    provider = ValueSetProvider(
        policy,
        {name: make_fetcher(config) for name, config in policy.sources.items()},
        SimpleMemoryCache(timeout=None),
        GatewayMetrics(registry),
        retry_after=60.0,
    )
    await provider.start()
    return provider, registry


async def test_a_change_at_the_source_is_served_after_the_next_refresh(tmp_path, source: SourceServer) -> None:  # type: ignore[no-untyped-def]
    provider, registry = await start_provider(tmp_path, source, ttl="400ms")
    try:
        assert (await provider.get("refunds.reason_codes")).version == 1  # type: ignore[union-attr]
        source.catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "NEW_CODE"])

        async def updated() -> bool:
            snapshot = await provider.get("refunds.reason_codes")
            return snapshot is not None and snapshot.version == 2

        await eventually(updated)
        snapshot = await provider.get("refunds.reason_codes")
        assert snapshot is not None
        assert "NEW_CODE" in snapshot.members
        assert {"NOT_RECEIVED", "BROKEN"} <= snapshot.retired  # removed members become retired
        assert value(registry, "argwatch_value_set_members", set="refunds.reason_codes") == 2
    finally:
        await provider.close()


async def test_a_down_source_is_asked_once_not_once_per_call(tmp_path, source: SourceServer) -> None:  # type: ignore[no-untyped-def]
    provider, registry = await start_provider(tmp_path, source, ttl="300ms")
    try:
        await source.stop()

        async def expired() -> bool:
            return await provider.get("refunds.reason_codes") is None

        await eventually(expired)
        errors = value(registry, "argwatch_value_set_refresh_total", set="refunds.reason_codes", result="error")
        results = await asyncio.gather(*(provider.get("refunds.reason_codes") for _ in range(200)))
        assert results == [None] * 200
        # Within retry_after (60 s) of the last failure, no call fetches again or waits on the source.
        assert value(registry, "argwatch_value_set_refresh_total", set="refunds.reason_codes", result="error") == errors
    finally:
        await provider.close()


async def test_concurrent_misses_share_one_fetch(tmp_path, source: SourceServer) -> None:  # type: ignore[no-untyped-def]
    provider, registry = await start_provider(tmp_path, source)
    try:
        ok_before = value(registry, "argwatch_value_set_refresh_total", set="identity.handles", result="ok")
        # As if the TTL had run out: the cache entry and the near copy both gone.
        await provider._cache.delete("argwatch:valueset:identity.handles")
        provider._near.pop("identity.handles")
        results = await asyncio.gather(*(provider.get("identity.handles") for _ in range(50)))
        assert all(r is not None and r.size == 500 for r in results)
        assert value(registry, "argwatch_value_set_refresh_total", set="identity.handles", result="ok") == ok_before + 1
    finally:
        await provider.close()
