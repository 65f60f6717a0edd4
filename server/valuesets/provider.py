"""The value-set provider: fetches sets from their sources and serves immutable snapshots from an aiocache cache.

How a snapshot stays fresh, and what happens when it cannot:
- At start every set is fetched once, concurrently.
- A refresher per set re-fetches it every half TTL (with jitter, so sets and
  replicas do not fetch in lockstep) and re-stores it with the full TTL. The
  hot path therefore finds the set in the cache and never waits on a source.
- The cache entry expires after the TTL. If the source stayed down that long,
  the set is gone: checks against it fail open (or closed, per policy), and
  every one is counted.
- On a miss, one fetch per set runs at a time (callers share it), and a failed
  fetch is remembered for `retry_after` seconds, so a down source costs each
  call one dictionary look-up, not a connection timeout.
- The aiocache cache is the store of record (shared by replicas once it is
  Redis). In front of it each process keeps a near copy, the snapshot
  reference and when it expires, because aiocache's decorator layers cost
  ~5 us a get here and a shared backend would cost a network round trip.
  The near copy never outlives the entry it copies.

The next issue's streaming refresh and staleness replace the refresher's loop;
`get` and `status` keep their shape.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from argwatch.server.metrics import GatewayMetrics
from argwatch.server.policy_model import Normalisation, Policy, ValueSetConfig
from argwatch.server.valuesets.payload import SetFetcher, SourceUnavailable
from argwatch.server.valuesets.snapshot import ValueSetSnapshot, make_snapshot

log = logging.getLogger("argwatch.valuesets")

CACHE_KEY_PREFIX = "argwatch:valueset:"
NEAR_RECHECK_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class ValueSetState:
    """What the provider knows of one set, for status reports."""

    config: ValueSetConfig
    snapshot: ValueSetSnapshot | None  # None: not in the cache (never loaded, or expired)
    last_error: str


class ValueSetProvider:
    """Serves the policy's value sets; see the module docstring for the freshness rules."""

    def __init__(
        self,
        policy: Policy,
        fetchers: Mapping[str, SetFetcher],
        cache: Any,  # an aiocache BaseCache; memory by default, shared (Redis) with several replicas
        metrics: GatewayMetrics,
        *,
        clock: Callable[[], float] = time.time,
        retry_after: float = 2.0,
    ) -> None:
        self._policy = policy
        self._fetchers = fetchers
        self._cache = cache
        self._metrics = metrics
        self._clock = clock
        self._retry_after = retry_after
        self._rules = _rules_by_set(policy)
        self._inflight: dict[str, asyncio.Task[ValueSetSnapshot | None]] = {}
        self._failed_until: dict[str, float] = {}
        self._last_error: dict[str, str] = {}
        self._refreshers: list[asyncio.Task[None]] = []
        metrics.watch_value_sets(self._confirmed_times)
        self._latest: dict[str, ValueSetSnapshot] = {}
        # name -> (snapshot, time.monotonic() at which it expires)
        self._near: dict[str, tuple[ValueSetSnapshot, float]] = {}

    async def start(self) -> None:
        """Loads every set once (failures are logged and counted, not raised), then refreshes in the background."""
        await asyncio.gather(*(self._load(name) for name in self._policy.value_sets))
        for config in self._policy.value_sets.values():
            self._refreshers.append(asyncio.create_task(self._refresh_forever(config)))

    async def close(self) -> None:
        for task in [*self._refreshers, *self._inflight.values()]:
            task.cancel()
        await asyncio.gather(*self._refreshers, *self._inflight.values(), return_exceptions=True)
        self._refreshers.clear()
        await asyncio.gather(*(fetcher.close() for fetcher in self._fetchers.values()))

    async def get(self, name: str) -> ValueSetSnapshot | None:
        """The set's current snapshot, or None when it cannot be had now (the check then fails open or closed)."""
        near = self._near.get(name)
        if near is not None and near[1] > time.monotonic():
            return near[0]
        snapshot: ValueSetSnapshot | None = await self._cache.get(CACHE_KEY_PREFIX + name)
        if snapshot is not None:
            # Fetched into the shared cache by someone else: its remaining TTL is unknown
            # here, so hold it near only briefly before asking the cache again.
            self._near[name] = (snapshot, time.monotonic() + min(NEAR_RECHECK_SECONDS, self._ttl(name)))
            return snapshot
        if self._failed_until.get(name, 0.0) > time.monotonic():
            return None
        task = self._inflight.get(name)
        if task is None:
            task = asyncio.create_task(self._load(name))
            self._inflight[name] = task
            task.add_done_callback(lambda _: self._inflight.pop(name, None))
        # Shielded: a caller that gives up (deadline, cancel) does not cancel the shared fetch.
        return await asyncio.shield(task)

    async def refresh(self, name: str) -> ValueSetSnapshot | None:
        """Fetches the set now, whatever the cache holds."""
        return await self._load(name)

    async def states(self) -> list[ValueSetState]:
        """Every configured set, in policy order, with its cached snapshot if any."""
        result = []
        for name, config in self._policy.value_sets.items():
            snapshot = await self._cache.get(CACHE_KEY_PREFIX + name)
            result.append(ValueSetState(config, snapshot, self._last_error.get(name, "")))
        return result

    async def _load(self, name: str) -> ValueSetSnapshot | None:
        config = self._policy.value_sets[name]
        fetcher = self._fetchers[config.source]
        try:
            payload = await fetcher.fetch(name)
        except SourceUnavailable as error:
            self._failed(config, str(error))
            return None
        except Exception as error:  # a source bug must not take the gateway down; it is counted
            log.exception("value set %s: unexpected error from source %s", name, config.source)
            self._failed(config, f"{type(error).__name__}: {error}")
            return None
        snapshot = make_snapshot(
            name,
            payload.version,
            payload.members,
            payload.retired,
            confirmed_at=self._clock(),
            rules=self._rules.get(name, ()),
        )
        expires = time.monotonic() + config.ttl_seconds
        await self._cache.set(CACHE_KEY_PREFIX + name, snapshot, ttl=config.ttl_seconds)
        self._near[name] = (snapshot, expires)
        previous = self._latest.get(name)
        self._latest[name] = snapshot
        self._failed_until.pop(name, None)
        self._last_error.pop(name, None)
        self._metrics.value_set_refreshed(name, config.source, snapshot.size, ok=True)
        if previous is None or previous.version != snapshot.version:
            log.info("value set %s: version %d, %d members", name, snapshot.version, snapshot.size)
        return snapshot

    def _ttl(self, name: str) -> float:
        return self._policy.value_sets[name].ttl_seconds

    def _failed(self, config: ValueSetConfig, reason: str) -> None:
        if self._last_error.get(config.name) != reason:
            log.warning("value set %s: source %s unavailable: %s", config.name, config.source, reason)
        self._last_error[config.name] = reason
        self._failed_until[config.name] = time.monotonic() + self._retry_after
        self._metrics.value_set_refreshed(config.name, config.source, None, ok=False)

    async def _refresh_forever(self, config: ValueSetConfig) -> None:
        interval = config.ttl_seconds / 2
        backoff = min(self._retry_after, interval)
        delay = interval
        while True:
            await asyncio.sleep(delay * random.uniform(0.9, 1.1))
            if await self._load(config.name) is not None:
                delay, backoff = interval, min(self._retry_after, interval)
            else:
                # Retry sooner than the regular interval, backing off up to it.
                delay, backoff = backoff, min(backoff * 2, interval)

    def _confirmed_times(self) -> Iterable[tuple[str, float]]:
        return [(name, snapshot.confirmed_at) for name, snapshot in self._latest.items()]


def _rules_by_set(policy: Policy) -> dict[str, tuple[Normalisation, ...]]:
    rules: dict[str, set[Normalisation]] = {}
    for tool in policy.tools.values():
        for binding in tool.arguments:
            rules.setdefault(binding.value_set, set()).add(binding.normalisation)
    return {name: tuple(found) for name, found in rules.items()}
