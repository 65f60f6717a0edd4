"""The cache replicas share (Redis through aiocache), with a deadline and a local fallback.

Used for pulled value sets (so N replicas do not each pull an owning service),
for repair state (so Repair works on any replica) and for the operations of
tools with side effects (so a repeat on another replica is caught). Every write
goes to local memory (ttl_store.py) and to Redis; a read tries Redis, then
local memory. A Redis
operation never takes longer than `timeout`: on an error or a timeout the
operation is counted (argwatch_shared_cache_errors_total), answered from local
memory, and Redis is left alone for `retry_after` seconds, so while Redis is
down a request pays a dictionary look-up, not a timeout.

Values are JSON of shapes declared with @shared_value (codec.py), never
pickle: a value read back that is not one of them is counted
(argwatch_shared_cache_rejected_total{reason}) and treated as a miss.
Without a Redis URL the cache is local memory only. The URL may name one Redis, a
primary watched by Sentinel, or a Cluster (redis_url.py); in a Cluster, the keys
a script changes together carry one hash tag (keys_together), so the script
runs on one slot; with one Redis or Sentinel no key has a tag, and key names
are what they always were.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

from aiocache import RedisCache
from aiocache.serializers import BaseSerializer
from redis.asyncio.client import PubSub

from argwatch.server.state.codec import Corrupt, decode, encode
from argwatch.server.state.redis_connect import close_client, cluster_mode, redis_client, subscription
from argwatch.server.state.ttl_store import TtlStore
from argwatch.server.telemetry.metrics import GatewayMetrics

log = logging.getLogger("argwatch.shared_cache")
# KEYS[1], KEYS[2]; ARGV: their values and the lifetime in ms. 1 when both were stored, 0 when KEYS[1] was held.
_ADD_THEN_SET = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""


async def _add_then_set(remote: Any, key: str, value: Any, then_key: str, then_value: Any, ttl: float) -> int:
    """The script, with keys and values as aiocache writes them (its namespace, its serializer), so that
    aiocache reads them back."""
    dumps = remote.serializer.dumps
    keys = (remote.build_key(key), remote.build_key(then_key))
    return int(await remote.client.eval(_ADD_THEN_SET, 2, *keys, dumps(value), dumps(then_value), int(ttl * 1000)))


class SharedValueSerializer(BaseSerializer):  # type: ignore[misc]  # aiocache ships no types
    """aiocache's serializer slot, filled with codec.py's JSON (bytes in and out; never pickle)."""

    DEFAULT_ENCODING = None

    def dumps(self, value: object) -> bytes:
        return encode(value)

    def loads(self, value: bytes | None) -> Any:
        return None if value is None else decode(value)


# How long the shared cache's client waits to connect, and so to close a connection (redis-py).
CONNECT_SECONDS = 2.0


def redis_from_url(url: str) -> Any:
    """An aiocache RedisCache for a `--redis` URL (redis_url.py: one Redis, Sentinel or Cluster); raises
    ValueError on a bad URL."""
    cache = RedisCache(serializer=SharedValueSerializer(), namespace="argwatch", timeout=None)
    # aiocache 0.12 builds its client from a host, port and password only (no ACL user, the password taken
    # as written, percent-escapes and all), and reaches Redis through its `client` attribute alone: the
    # client the mode store uses, put in its place, serves every operation for all three kinds of URL. The
    # pool aiocache made has opened no connection, so nothing is left open. Our own deadline covers every
    # operation (no read timeout here).
    cache.client = redis_client(url, timeout=None, connect_timeout=CONNECT_SECONDS)
    return cache


class SharedCache:
    """Redis when it answers in time, local memory always: the Cache (state/cache.py) the gateway runs on."""

    def __init__(
        self,
        remote: Any | None,
        metrics: GatewayMetrics,
        *,
        timeout: float = 0.05,
        retry_after: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._remote = remote
        self._local = TtlStore(monotonic, on_evict=lambda: metrics.table_eviction("shared_cache_local"))
        self._metrics = metrics
        self._timeout = timeout
        self._retry_after = retry_after
        self._monotonic = monotonic
        self._skip_until = 0.0
        self._next_rejection_log = 0.0

    async def start(self, connect_seconds: float = 2.0) -> bool:
        """Connects to Redis once with a generous deadline, so no request pays for the handshake.

        Returns whether Redis answered; the gateway serves either way (from memory meanwhile).
        """
        if self._remote is None:
            return True
        try:
            async with asyncio.timeout(connect_seconds):
                await self._remote.client.ping()
        except Exception as error:
            log.warning(
                "shared cache (Redis) unreachable at start (%s): using local memory until it answers",
                error or type(error).__name__,
            )
            self._metrics.shared_cache_error("connect")
            self._skip_until = self._monotonic() + self._retry_after
            return False
        return True

    @property
    def remote_configured(self) -> bool:
        return self._remote is not None

    def keys_together(self, group: str) -> str:
        """A Redis Cluster hash tag for `group` (a digest: a caller's text never chooses the slot's
        braces), to put in every key a script changes together; empty otherwise, so key names stay as
        replicas of earlier versions write them."""
        if self._remote is None or not cluster_mode(self._remote.client):
            return ""
        return "{" + hashlib.blake2b(group.encode(), digest_size=8).hexdigest() + "}"

    async def delete(self, key: str) -> None:
        self._local.delete(key)
        if self.remote_healthy:
            await self._remote_call("delete", key)

    @property
    def remote_healthy(self) -> bool:
        return self._remote is not None and self._monotonic() >= self._skip_until

    async def get(self, key: str, kind: type | None = None) -> Any:
        """Redis's value, else this replica's; with `kind`, a value of another type (one argwatch did not write
        under this key) is rejected and counted, and this replica's own copy answers."""
        if self.remote_healthy:
            found = await self._remote_call("get", key)
            if isinstance(found, Corrupt):
                self._rejected(key, found.reason)
            elif found is not None and kind is not None and not isinstance(found, kind):
                self._rejected(key, "wrong_type")
            elif found is not None:
                return found
        found = self._local.get(key)
        return found if kind is None or isinstance(found, kind) else None

    def _rejected(self, key: str, reason: str) -> None:
        """A value in Redis that the gateway did not write: counted, logged at most once a minute, ignored."""
        self._metrics.shared_cache_rejected(reason)
        now = self._monotonic()
        if now >= self._next_rejection_log:
            self._next_rejection_log = now + 60.0
            log.warning("shared cache (Redis): ignoring a value under %r that argwatch did not write (%s)", key, reason)

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        self._local.set(key, value, ttl=ttl)
        if self.remote_healthy:
            await self._remote_call("set", key, value, ttl=ttl)

    async def add_then_set(self, key: str, value: Any, then_key: str, then_value: Any, ttl: float) -> bool:
        """add(key, value), and only when that stored it, set(then_key, then_value); True when stored.

        One round trip to Redis (a script: SET NX, then SET), where add and set would take two: a new
        operation of a tool with side effects and its call id are stored at once.
        """
        if self.remote_healthy:
            stored = await self._remote_call("add_then_set", key, value, then_key, then_value, ttl)
            if stored is not None:
                if stored:  # keep the local copies in step
                    self._local.set(key, value, ttl=ttl)
                    self._local.set(then_key, then_value, ttl=ttl)
                return bool(stored)
        if not self._local.add(key, value, ttl=ttl):
            return False
        self._local.set(then_key, then_value, ttl=ttl)
        return True

    @property
    def shared_now(self) -> bool:
        """Whether operations reach every replica now: no Redis configured (one replica), or Redis
        answering. False from a failed operation until `retry_after` has passed."""
        return self._remote is None or self.remote_healthy

    async def publish(self, channel: str, message: str) -> None:
        """Announces `message` to every replica (best effort, within the same deadline as any operation)."""
        if self.remote_healthy:
            await self._remote_call("publish", channel, message)

    def pubsub(self) -> PubSub | None:
        """A redis-py PubSub on the shared Redis (its own connection), or None without Redis."""
        return subscription(self._remote.client) if self._remote is not None else None

    async def close(self) -> None:
        if self._remote is not None:
            # The redis-py client directly: aiocache 0.12's close() calls the deprecated
            # Redis.close() and leaves the pool it created open.
            client = self._remote.client
            try:
                # Longer than a connection's own deadline to close (its connect timeout, in redis-py): cut
                # short, the client is left unmarked as closed and a node's close may never start.
                async with asyncio.timeout(2 * CONNECT_SECONDS):
                    await close_client(client)
            except Exception as error:  # closing a dead connection must not fail shutdown
                log.debug("closing the shared cache: %s", error)
            finally:
                if not cluster_mode(client):  # close_client closed every Cluster node's connections
                    await client.connection_pool.disconnect()

    async def _remote_call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                # publish and the script are redis-py's own (aiocache has neither); the rest go through aiocache.
                remote: Any = self._remote
                if operation == "add_then_set":
                    return await _add_then_set(remote, *args)
                target = remote.client if operation == "publish" else remote
                return await getattr(target, operation)(*args, **kwargs)
        except Exception as error:
            if self._monotonic() >= self._skip_until:
                log.warning(
                    "shared cache (Redis) %s failed: %s; using local memory for %.1fs",
                    operation,
                    error or type(error).__name__,
                    self._retry_after,
                )
            self._metrics.shared_cache_error(operation)
            self._skip_until = self._monotonic() + self._retry_after
            return None
