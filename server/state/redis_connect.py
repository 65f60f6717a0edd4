"""redis-py clients for a `--redis` target (one Redis, Sentinel or Cluster), and one pinned connection for a
transaction that must be followed by WAIT on the connection that wrote it.

With Sentinel, the client's pool asks the sentinels for the primary on every new connection, and drops
connections to a primary that was demoted: after a failover the next command reaches the new primary.
With Cluster, each key goes to the node that owns its slot; classic PUBLISH reaches every node's
subscribers, so a subscription on any node hears every announcement.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, RedisClusterException, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from argwatch.server.state.redis_url import RedisKind, parse_redis_url

# A client for any of the three kinds: they share the command methods argwatch uses.
RedisClient = aioredis.Redis | RedisCluster
# Sends commands on one connection, in order, and returns their replies (an error reply raised).
Commands = Callable[..., Awaitable[list[Any]]]
# What a Redis that is away raises: redis-py's Cluster client reports a Cluster it cannot reach (no node
# answers, slots uncovered) with RedisClusterException, which is not a RedisError.
STORE_ERRORS: tuple[type[BaseException], ...] = (RedisError, RedisClusterException, OSError)


def redis_client(url: str, *, timeout: float | None, connect_timeout: float) -> RedisClient:
    """A client for the `--redis` URL; `timeout` bounds every read (None: none, for a subscriber)."""
    target = parse_redis_url(url)
    if target.kind is RedisKind.SINGLE:
        return aioredis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect_timeout)
    credentials: dict[str, Any] = {"username": target.username, "password": target.password}
    if target.kind is RedisKind.CLUSTER:
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in target.hosts],
            socket_timeout=timeout,
            socket_connect_timeout=connect_timeout,
            **credentials,
        )
    sentinels = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        list(target.hosts),
        # The sentinels always answer within a deadline, even for a subscriber without one: discovering
        # the primary must not hang on a sentinel that stopped answering.
        sentinel_kwargs={"socket_timeout": connect_timeout, "socket_connect_timeout": connect_timeout},
    )
    primary: aioredis.Redis = sentinels.master_for(
        target.service,
        db=target.db,
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout,
        **credentials,
    )
    return primary


def describe_error(error: BaseException, url: str) -> str:
    """`error` in on-call's words, for GetStatus and logs. redis-py's "no master found" names every sentinel
    client with its whole configuration; what matters is whether the sentinels answered (then they know no
    healthy primary: a failover under way, or none possible) or none did."""
    if isinstance(error, MasterNotFoundError):
        target = parse_redis_url(url)
        # redis-py appends "<sentinel client> - <error>" for each sentinel that did not answer.
        silent = str(error).count("> - ")
        if silent >= len(target.hosts):
            return f"no sentinel answered ({target.describe()})"
        unanswered = f"; {silent} of {len(target.hosts)} did not answer" if silent else ""
        return (
            f"the sentinels know no healthy primary for {target.service!r} (a failover under way, or no replica "
            f"to promote){unanswered} ({target.describe()})"
        )
    return str(error) or type(error).__name__


async def close_client(client: RedisClient) -> None:
    """Closes the client's connections, and with Sentinel its connections to the sentinels, which the
    primary's client does not own."""
    if isinstance(client, RedisCluster):
        await _close_cluster(client)
        return
    try:
        await client.aclose()
    finally:
        pool = client.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


async def _close_cluster(client: RedisCluster) -> None:
    """Closes every connection to every node the client knows, and to every startup node (separate objects,
    with connections of their own). redis-py's RedisCluster.aclose does nothing while the client waits to
    learn the Cluster's layout again, as it does from a node's connection error until its next command:
    closed then, as a gateway may well be after a failover, every node's connections stayed open. It also
    stops at the first node whose connection does not close within its deadline, before the startup nodes.
    Not reached: a node a layout refresh dropped while one of its connections was in use, which redis-py
    closes when that command ends (the gateway ends its commands before it closes its clients)."""
    manager = client.nodes_manager
    nodes = {id(node): node for node in (*manager.nodes_cache.values(), *manager.startup_nodes.values())}
    # Each node whatever another's does: a node's disconnect already tries all its connections.
    outcomes = await asyncio.gather(*(node.disconnect() for node in nodes.values()), return_exceptions=True)
    # redis-py's own close, for the state it keeps (it does nothing while the client waits to relearn the
    # layout); every connection it would close is closed already.
    await client.aclose()
    failure = next((outcome for outcome in outcomes if isinstance(outcome, BaseException)), None)
    if failure is not None:
        raise failure


def cluster_mode(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)


def subscription(client: RedisClient) -> PubSub:
    """A subscription for announcements on `client`'s Redis. In a Cluster, a classic SUBSCRIBE on any node
    hears every PUBLISH made on any node, so it is one node's connection, a different node at random
    each time (a subscriber that lost its node comes back on another); redis-py's cluster subscription
    needs the cluster's layout learnt first, which a Redis down at start never gives it."""
    if not isinstance(client, RedisCluster):
        return client.pubsub()
    manager = client.nodes_manager
    nodes = [node for node in manager.nodes_cache.values() if node.server_type != "replica"]
    node = random.choice(nodes or list(manager.startup_nodes.values()))
    options = node.connection_kwargs
    pool = aioredis.ConnectionPool(
        host=node.host,
        port=node.port,
        username=options.get("username"),
        password=options.get("password"),
        socket_connect_timeout=options.get("socket_connect_timeout"),
    )
    return _NodeSubscription(pool)


class _NodeSubscription(PubSub):
    """A subscription on one Cluster node, that closes the pool made for it with it."""

    async def aclose(self) -> None:
        await super().aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        await self.connection_pool.disconnect()


@contextlib.asynccontextmanager
async def pinned_connection(
    client: RedisClient, key: str, asking: tuple[str, int] | None = None
) -> AsyncIterator[Commands]:
    """One connection to the primary that holds `key`, for WATCH ... EXEC and then WAIT: WAIT counts the
    replicas that have what *this connection* wrote, so it cannot go through a pool that may hand out
    another. Commands sent together are pipelined (one round trip). Any error disconnects the connection
    before it goes back to its pool, so no unread reply is left on it.

    `asking`: the Cluster node an ASK redirection named (the key's slot is being migrated to it, and the key
    already moved): the connection goes there, and each command is preceded by ASKING, which the node
    honours for the next command only, or, sent before MULTI, for the whole transaction."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        node = client.get_node_from_key(key) if asking is None else await _node_at(client, *asking)
        if node is None:  # the slot's primary: never None, typed so for replicas
            sent = f" at {asking[0]}:{asking[1]}, where an ASK sent it" if asking is not None else ""
            raise RedisConnectionError(f"no node holds {key!r}{sent}")
        connection: Any = node.acquire_connection()
        release: Callable[[], Awaitable[None]] = _released_to_node(node, connection)
    else:
        pool = client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]  # unannotated in redis-py
        release = _released_to_pool(pool, connection)
    in_transaction = False

    async def commands(*batch: tuple[Any, ...]) -> list[Any]:
        nonlocal in_transaction
        sent: list[tuple[Any, ...]] = []
        for command in batch:
            if asking is not None and not in_transaction:
                sent.append(("ASKING",))
            sent.append(command)
            name = str(command[0]).upper()
            in_transaction = (in_transaction or name == "MULTI") and name not in ("EXEC", "DISCARD")
        await connection.send_packed_command(connection.pack_commands(sent))
        # Every reply read, errors too (read_response raises one): a caller that handles an error reply goes
        # on with the connection, which must hold no unread reply of this batch.
        replies: list[Any] = []
        for _ in sent:
            try:
                replies.append(await connection.read_response())
            except ResponseError as error:
                replies.append(error)
        if asking is not None:
            replies = [reply for command, reply in zip(sent, replies, strict=True) if command[0] != "ASKING"]
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    try:
        yield commands
    except BaseException as error:
        await connection.disconnect()
        if isinstance(client, RedisCluster) and isinstance(
            error, MovedError | RedisConnectionError | RedisTimeoutError
        ):
            # The slot moved (a Cluster failover or resharding) or the node went away: learn the
            # Cluster's layout again before the next attempt.
            with contextlib.suppress(Exception):
                await client.nodes_manager.initialize()
        raise
    finally:
        await release()


async def _node_at(client: RedisCluster, host: str, port: int) -> ClusterNode | None:
    """The Cluster node at host:port, learning the Cluster's layout again if the client does not know it."""
    known = client.get_node(host=host, port=port)
    if known is None:
        await client.nodes_manager.initialize()
        known = client.get_node(host=host, port=port)
    return known


def _released_to_node(node: ClusterNode, connection: Any) -> Callable[[], Awaitable[None]]:
    async def release() -> None:
        node.release(connection)

    return release


def _released_to_pool(pool: Any, connection: Any) -> Callable[[], Awaitable[None]]:
    async def release() -> None:
        await pool.release(connection)

    return release
