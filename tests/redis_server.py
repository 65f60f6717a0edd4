"""Real redis-server and redis-sentinel processes on free loopback ports, started and stopped by the tests
(make test installs both): one Redis, a primary with a replica watched by sentinels, or a 3-primary Cluster."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SERVICE = "argwatch"  # the primary's name as the sentinels know it


@dataclass
class RedisProcess:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _binary(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        raise RuntimeError(f"{name} is not installed: `make test` installs it with apt-get")
    return binary


Reply = bytes | int | list["Reply"] | None


def ask(port: int, *command: str, timeout: float = 2.0) -> Reply:
    """One command to a Redis or a sentinel and its reply (an error reply as RuntimeError), over a plain
    socket: the helpers need no client, so a fault in argwatch's Redis code cannot hide one of the set-up."""
    request = f"*{len(command)}\r\n".encode() + b"".join(
        f"${len(part.encode())}\r\n{part}\r\n".encode() for part in command
    )
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(request)
        received = b""
        while True:
            try:
                reply, _ = _parse(received, 0)
                return reply
            except _Incomplete:
                chunk = connection.recv(65536)
                if not chunk:
                    raise ConnectionError("closed mid-reply") from None
                received += chunk


class _Incomplete(Exception):
    pass


def _parse(data: bytes, at: int) -> tuple[Reply, int]:
    end = data.find(b"\r\n", at)
    if end < 0:
        raise _Incomplete
    kind, line, at = data[at : at + 1], data[at + 1 : end], end + 2
    if kind == b"+":
        return line, at
    if kind == b"-":
        raise RuntimeError(line.decode())
    if kind == b":":
        return int(line), at
    if kind == b"$":
        size = int(line)
        if size < 0:
            return None, at
        if len(data) < at + size + 2:
            raise _Incomplete
        return data[at : at + size], at + size + 2
    if kind == b"*":
        size = int(line)
        if size < 0:
            return None, at
        items: list[Reply] = []
        for _ in range(size):
            item, at = _parse(data, at)
            items.append(item)
        return items, at
    raise RuntimeError(f"not RESP: {data[:40]!r}")


def field_of(reply: Reply, name: str) -> Reply:
    """A field of a flat [name, value, ...] reply (SENTINEL MASTER)."""
    assert isinstance(reply, list)
    pairs = dict(zip(reply[::2], reply[1::2], strict=True))
    return pairs.get(name.encode())


def info(port: int, section: str) -> str:
    reply = ask(port, "INFO", section)
    assert isinstance(reply, bytes)
    return reply.decode()


def wait_for(
    predicate: Callable[[], bool], what: str, seconds: float = 10.0, until: Callable[[], bool] = lambda: False
) -> None:
    """Polls `predicate` (socket errors read as False) until true, within `seconds`; gives up at once when
    `until` holds (the process exited)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if predicate():
                return
        except (OSError, RuntimeError):  # not up yet, or an error reply (LOADING)
            pass
        if until():
            raise RuntimeError(f"{what}: the process exited")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {seconds}s")
        time.sleep(0.05)


def start_redis(folder: str, port: int = 0, *, extra: tuple[str, ...] = ()) -> RedisProcess:
    """A redis-server without persistence on `port` (0: a free one); a restart on the same port starts empty."""
    binary = _binary("redis-server")
    port = port or free_port()
    options = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", folder]
    return _answering([binary, *options, *extra], port, "redis-server")


def _answering(command: list[str], port: int, what: str) -> RedisProcess:
    """Starts `command` and waits for it to answer PING on `port`; stops it if it does not (or exits)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(
            lambda: process.poll() is None and ask(port, "PING") == b"PONG",
            f"{what} on port {port} answering",
            until=lambda: process.poll() is not None,
        )
    except RuntimeError:
        process.kill()
        process.wait(timeout=10)
        raise
    return RedisProcess(process, port)


@dataclass
class SentinelGroup:
    """A primary, its replica, and three sentinels (quorum 2) watching them as SERVICE."""

    primary: RedisProcess
    replica: RedisProcess
    sentinels: list[RedisProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            try:
                reply = ask(sentinel.port, "SENTINEL", "get-master-addr-by-name", SERVICE)
            except (OSError, RuntimeError):
                continue
            if isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], bytes):
                return int(reply[1])
        raise RuntimeError("no sentinel names a primary")

    def stop(self) -> None:
        for process in [*self.sentinels, self.primary, self.replica]:
            process.kill()


def start_sentinel_group(folder: str, *, down_after_ms: int = 500, failover_timeout_ms: int = 2000) -> SentinelGroup:
    """A primary with one replica and three sentinels, every one on loopback; returns once the replica has
    synced and every sentinel knows the other two (so a failover can be agreed at once)."""
    made: list[RedisProcess] = []
    try:
        primary = start_redis(_subfolder(folder, "primary"))
        made.append(primary)
        replica = start_redis(_subfolder(folder, "replica"), extra=("--replicaof", "127.0.0.1", str(primary.port)))
        made.append(replica)
        wait_for(lambda: "master_link_status:up" in info(replica.port, "replication"), "the replica syncing")
        group = SentinelGroup(primary, replica)
        for index in range(3):
            group.sentinels.append(_start_sentinel(folder, index, primary.port, down_after_ms, failover_timeout_ms))
            made.append(group.sentinels[-1])
        wait_for(
            lambda: all(
                field_of(ask(sentinel.port, "SENTINEL", "master", SERVICE), "num-other-sentinels") == b"2"
                for sentinel in group.sentinels
            ),
            "the sentinels finding each other",
            seconds=20.0,
        )
        return group
    except BaseException:
        for process in made:
            process.kill()
        raise


def _start_sentinel(folder: str, index: int, primary_port: int, down_after_ms: int, failover_ms: int) -> RedisProcess:
    port = free_port()
    home = _subfolder(folder, f"sentinel{index}")
    config = os.path.join(home, "sentinel.conf")  # the sentinel rewrites it: its own file, writable
    with open(config, "w", encoding="utf-8") as out:
        out.write(
            f"port {port}\nbind 127.0.0.1\ndir {home}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} {failover_ms}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
    return _answering([_binary("redis-sentinel"), config], port, "redis-sentinel")


@dataclass
class RedisCluster:
    """Three primaries holding every slot between them, each with `replicas` replicas."""

    nodes: list[RedisProcess]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    def flushall(self) -> None:
        for node in self.nodes:
            ask(node.port, "FLUSHALL")

    def layout(self) -> dict[int, ClusterNodeLine]:
        """The Cluster as a live node sees it (CLUSTER NODES), by port."""
        for node in self.nodes:
            if node.process.poll() is None:
                listing = ask(node.port, "CLUSTER", "NODES")
                assert isinstance(listing, bytes)
                return {line.port: line for line in map(ClusterNodeLine.parse, listing.decode().splitlines())}
        raise RuntimeError("no node of the cluster is running")

    def primary_of(self, key: str) -> RedisProcess:
        """The node that serves `key`'s slot now."""
        serving = self.serving(key)
        if serving is None:
            raise AssertionError(f"no primary of the cluster holds the slot of {key!r} now")
        return serving

    def serving(self, key: str) -> RedisProcess | None:
        """The node that serves `key`'s slot now, or None while no primary claims it: in a failover, the node
        asked can list the dead primary as failed and the promoted replica before either holds the slot."""
        slot = self.slot_of(key)
        ports = [line.port for line in self.layout().values() if line.primary and line.holds(slot)]
        return next((node for node in self.nodes if ports and node.port == ports[0]), None)

    def replica_of(self, primary: RedisProcess) -> RedisProcess:
        layout = self.layout()
        port = next(line.port for line in layout.values() if line.replica_of == layout[primary.port].node_id)
        return next(node for node in self.nodes if node.port == port)

    def slot_of(self, key: str) -> int:
        slot = ask(next(node.port for node in self.nodes if node.process.poll() is None), "CLUSTER", "KEYSLOT", key)
        assert isinstance(slot, int)
        return slot


@dataclass(frozen=True)
class ClusterNodeLine:
    """One line of CLUSTER NODES: id, address, flags, primary's id, ping, pong, epoch, link, slots."""

    node_id: str
    port: int
    primary: bool
    replica_of: str  # the primary's id, "-" for a primary
    slots: tuple[tuple[int, int], ...]

    @classmethod
    def parse(cls, line: str) -> ClusterNodeLine:
        fields = line.split()
        ranges = tuple((int(part.split("-")[0]), int(part.split("-")[-1])) for part in fields[8:] if part[:1].isdigit())
        port = int(fields[1].split(":")[1].split("@")[0])
        return cls(fields[0], port, "master" in fields[2].split(","), fields[3], ranges)

    def holds(self, slot: int) -> bool:
        return any(low <= slot <= high for low, high in self.slots)


def start_cluster(folder: str, *, replicas: int = 0, node_timeout_ms: int = 15000) -> RedisCluster:
    """Three primaries (and `replicas` replicas of each), cluster-enabled redis-servers joined with
    `redis-cli --cluster create`; returns once every node says cluster_state:ok and every replica has its
    primary's copy. `node_timeout_ms`: how long a primary may be silent before its replica takes over."""
    nodes: list[RedisProcess] = []
    try:
        for index in range(3 * (1 + replicas)):
            home = _subfolder(folder, f"node{index}")
            nodes.append(
                start_redis(
                    home,
                    # The bus port named: by default it is the port plus 10000, past 65535 for a high free port.
                    extra=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        str(free_port()),
                        "--cluster-config-file",
                        os.path.join(home, "nodes.conf"),
                        "--cluster-node-timeout",
                        str(node_timeout_ms),
                    ),
                )
            )
        subprocess.run(
            [_binary("redis-cli"), "--cluster", "create"]
            + [f"127.0.0.1:{node.port}" for node in nodes]
            + ["--cluster-replicas", str(replicas), "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
        wait_for(lambda: all(_cluster_ok(node.port) for node in nodes), "the cluster forming")
        wait_for(lambda: all(_replica_synced(node.port) for node in nodes), "the replicas copying their primaries")
        return RedisCluster(nodes)
    except BaseException:
        for node in nodes:
            node.kill()
        raise


def _replica_synced(port: int) -> bool:
    """A primary, or a replica whose link to its primary is up."""
    replication = info(port, "replication")
    return "role:master" in replication or "master_link_status:up" in replication


def _cluster_ok(port: int) -> bool:
    reply = ask(port, "CLUSTER", "INFO")
    return isinstance(reply, bytes) and b"cluster_state:ok" in reply


def _subfolder(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    os.makedirs(path, exist_ok=True)
    return path
