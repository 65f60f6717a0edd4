"""The seam every user of the shared cache types against: what rejections, repairs, operations and pulled
sets ask of it. SharedCache (Redis with a local fallback) is the implementation; tests may pass their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the core imports this seam; it must not load Redis's client to do so
    from redis.asyncio.client import PubSub


class Cache(Protocol):
    """Keys with lifetimes, shared by the replicas when Redis is configured, local memory otherwise."""

    @property
    def remote_configured(self) -> bool:
        """Whether a Redis is configured (several replicas share the cache)."""
        ...

    @property
    def shared_now(self) -> bool:
        """Whether writes reach every replica now: no Redis (one replica) or Redis answering."""
        ...

    async def get(self, key: str, kind: type | None = None) -> Any:
        """The value, or None; with `kind`, None too for a value of another type (a foreign one in Redis)."""
        ...

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def add_then_set(self, key: str, value: Any, then_key: str, then_value: Any, ttl: float) -> bool:
        """add(key, value), and only when that stored it, set(then_key, then_value); True when stored.
        Both keys must carry the same keys_together() part."""
        ...

    def keys_together(self, group: str) -> str:
        """What to put in the keys of `group` that add_then_set changes together: a hash tag that keeps
        them in one slot of a Redis Cluster; empty elsewhere (key names unchanged)."""
        ...

    async def publish(self, channel: str, message: str) -> None: ...

    def pubsub(self) -> PubSub | None:
        """A subscription on the shared Redis, or None without one."""
        ...

    async def start(self, connect_seconds: float = 2.0) -> bool: ...

    async def close(self) -> None: ...
