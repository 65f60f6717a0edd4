"""The `--redis` URL read once: one Redis, a Sentinel-watched primary, or a Cluster (no Redis client loaded here).

Three forms, each refused with a clear error at start-up when malformed:

- `redis://[[user]:password@]host[:port][/db]` (and `rediss://` for TLS): one Redis;
- `redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]`: the sentinels to ask
  (default port 26379) and the name of the primary they watch; the password is the Redis servers', the
  sentinels are asked without one;
- `redis+cluster://[[user]:password@]host[:port][,host[:port]...]`: any nodes of a Redis Cluster (default
  port 6379; a Cluster has only database 0).

Sentinel and Cluster over TLS are not offered: nothing here has been run against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import unquote, urlparse

FORMS = (
    "redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] "
    "or redis+cluster://HOST:PORT[,HOST:PORT...]"
)


class RedisKind(Enum):
    SINGLE = "redis"
    SENTINEL = "sentinel"
    CLUSTER = "cluster"


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where the shared Redis is, as the URL said."""

    kind: RedisKind
    hosts: tuple[tuple[str, int], ...]  # the server (SINGLE), the sentinels, or the Cluster's seed nodes
    service: str = ""  # the primary's name, as the sentinels know it (SENTINEL only)
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    def describe(self) -> str:
        """Where, without the password: for logs and errors."""
        hosts = ",".join(f"{host}:{port}" for host, port in self.hosts)
        if self.kind is RedisKind.SENTINEL:
            return f"sentinel {hosts} service {self.service!r} db {self.db}"
        if self.kind is RedisKind.CLUSTER:
            return f"cluster {hosts}"
        return f"{hosts}/{self.db}"


def parse_redis_url(url: str) -> RedisTarget:
    """The target a `--redis` URL names; ValueError saying what is wrong and which forms are accepted."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        raise ValueError(f"expected {FORMS}, got {url!r}")
    scheme = scheme.lower()
    if "@" in rest.partition("/")[2]:  # a password with "/" unencoded: refused before any of it is echoed
        raise ValueError(f"write a '/' or '@' in the password as %2F or %40: {_hidden(url)!r}")
    if scheme in ("redis", "rediss"):
        return _single(url, scheme == "rediss")
    if scheme in ("rediss+sentinel", "rediss+cluster"):
        raise ValueError(f"TLS with Sentinel or Cluster is not supported; expected {FORMS}, got {_hidden(url)!r}")
    if scheme not in ("redis+sentinel", "redis+cluster"):
        raise ValueError(f"expected {FORMS}, got a URL of scheme {scheme!r}")
    if "?" in rest or "#" in rest:
        raise ValueError(f"--redis takes no query or fragment: {FORMS}")
    netloc, _, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    username, password = _credentials(userinfo) if at else (None, None)
    sentinel = scheme == "redis+sentinel"
    hosts = _hosts(hostlist, 26379 if sentinel else 6379)
    parts = [part for part in path.split("/")] if path else []
    if sentinel:
        if not parts or not parts[0]:
            raise ValueError(
                "redis+sentinel:// needs the name of the primary the sentinels watch after the hosts: "
                f"redis+sentinel://HOST:26379[,HOST:PORT...]/SERVICE[/DB], got {_hidden(url)!r}"
            )
        if len(parts) > 2:
            raise ValueError(f"redis+sentinel://HOSTS/SERVICE[/DB]: too many parts in {_hidden(url)!r}")
        db = _db(parts[1]) if len(parts) == 2 else 0
        return RedisTarget(RedisKind.SENTINEL, hosts, unquote(parts[0]), db, username, password)
    if any(parts) and parts != ["0"]:
        raise ValueError(f"a Redis Cluster has only database 0: redis+cluster://HOST:PORT[,HOST:PORT...], got {path!r}")
    return RedisTarget(RedisKind.CLUSTER, hosts, "", 0, username, password)


def _single(url: str, tls: bool) -> RedisTarget:
    if "," in url.partition("://")[2].partition("/")[0]:
        raise ValueError(
            "several hosts are for redis+sentinel:// (the sentinels) or redis+cluster:// (the nodes), "
            f"not redis://: {_hidden(url)!r}"
        )
    try:
        parsed = urlparse(url)
        port = parsed.port or 6379
    except ValueError as error:
        raise ValueError(f"expected redis://HOST:PORT/DB, got {_hidden(url)!r}: {error}") from None
    if not parsed.hostname:
        raise ValueError(f"expected redis://HOST:PORT/DB, got {_hidden(url)!r}: no host")
    db = _db(parsed.path.lstrip("/")) if parsed.path.strip("/") else 0
    return RedisTarget(
        RedisKind.SINGLE,
        ((parsed.hostname, port),),
        "",
        db,
        unquote(parsed.username) if parsed.username else None,
        unquote(parsed.password) if parsed.password is not None else None,
        tls,
    )


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    user, colon, password = userinfo.partition(":")
    if not colon:  # redis://secret@host: the one part given is the password, as redis-py reads it
        return None, unquote(user) or None
    return unquote(user) or None, unquote(password)


def _hosts(hostlist: str, default_port: int) -> tuple[tuple[str, int], ...]:
    hosts = []
    for one in hostlist.split(","):
        one = one.strip()
        if one.startswith("["):  # [v6]:port
            host, _, tail = one[1:].partition("]")
            port_text = tail.removeprefix(":")
        else:
            host, _, port_text = one.partition(":")
        if not host:
            raise ValueError(f"an empty host in {hostlist!r}: HOST:PORT[,HOST:PORT...]")
        hosts.append((host, _port(port_text, default_port)))
    return tuple(hosts)


def _port(text: str, default: int) -> int:
    if not text:
        return default
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"a port is a number from 1 to 65535, got {text!r}")
    return int(text)


def _db(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"a Redis database is a number, got {text!r}")
    return int(text)


def _hidden(url: str) -> str:
    """The URL with any password replaced, for an error message that may be logged."""
    scheme, separator, rest = url.partition("://")
    _, at, after = rest.rpartition("@")  # the last "@": a password may hold "/" or "@" unencoded
    if not at:
        return url
    return f"{scheme}{separator}***@{after}"
