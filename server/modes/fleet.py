"""Modes, overrides and their audit shared by every replica through Redis, and each replica's report for the fleet view.

The state is under KEY, with a version: a small head (version, overrides,
the newest entries) with the audit beside it in two sorted sets
(shared_head.py, format 2), or, while a replica of a release before format 2
reports to the fleet, one JSON document holding it all (format 1). A change is
made in a Redis transaction (WATCH, read, apply on top of what was read, write
back with the version bumped) and announced on CHANNEL; every replica re-reads
on the announcement, and every REREAD_SECONDS anyway, so a missed message
cannot leave a replica behind. Nothing is written over: a replica that finds Redis
lacking what it holds (Redis restarted empty, lost the last changes in a
failover, or was away while the replica audited by itself) adds what is
missing to what Redis holds (merge.py), so the fleet's modes survive a Redis
restart and no replica's copy is written over another's changes.

Redis down: every replica keeps enforcing the last modes it knew (they are
local, read on every call without touching Redis), reports the store
unreachable (GetStatus, argwatch_mode_store_connected), refuses mode changes
(which would reach only one replica) with a clear error, still reverts expired
overrides (time-based, the same on every replica), and catches up when Redis
returns.

Each replica also writes a short report (REPLICA_PREFIX + id, expiring after
REPORT_TTL_SECONDS): policy version, modes, value-set versions, sources. The
Admin API lists every replica that reported, and those that stopped.

Redis that fails over (Sentinel, or a Cluster whose primaries have replicas):
after EXEC, the connection that wrote the change asks for one replica's copy
(WAIT). A change no replica confirmed is in force, but a failover before a
replica copies it may undo it, and the Admin API's answer says so
(durability_warning). The replicas follow a promoted primary by themselves (the
Sentinel-aware client); a change the promoted replica lacks is written back by
a gateway that still holds it, beside any made since on the new primary (each
override follows its target's latest change), so the fleet agrees.
In a Cluster every key here carries the hash tag {argwatch:modes} (CLUSTER_KEYS),
so the reports are read with one MGET; with one Redis or Sentinel the names are
unchanged (KEYS), so replicas of earlier versions share the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, RedisError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from argwatch.common.backoff import backoff_delay
from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument, ModeRefused, OverrideRequest, Target
from argwatch.server.modes.merge import merge, missing_from
from argwatch.server.modes.shared_head import (
    FORMAT,
    LISTS,
    Head,
    StateReader,
    Synced,
    appended,
    entries_from_set,
    entry_json,
    followed,
    head_json,
    new_since,
    passed,
    rewritten,
    split,
    with_sets,
)
from argwatch.server.modes.shared_reader import as_written
from argwatch.server.modes.store import ModeStore, refusal_entry
from argwatch.server.policy.model import Mode
from argwatch.server.state.redis_connect import (
    STORE_ERRORS,
    Commands,
    RedisClient,
    close_client,
    describe_error,
    pinned_connection,
    redis_client,
    subscription,
)
from argwatch.server.state.redis_url import RedisKind, parse_redis_url
from argwatch.server.telemetry.metrics import GatewayMetrics

log = logging.getLogger("argwatch.modes.fleet")

KEY = "argwatch:modes"
CHANNEL = "argwatch:modes:changed"  # a channel, not a key: the same name in a Cluster
REPLICA_PREFIX = "argwatch:replica:"
REREAD_SECONDS = 2.0
REPORT_TTL_SECONDS = 10.0
FORGET_STOPPED_SECONDS = 600.0  # a replica that stopped reporting is listed as such for this long
SHARED_AUDIT_KEEP = 1000
SHARED_REFUSED_KEEP = 100
SHARED_KEEP = (SHARED_AUDIT_KEEP, SHARED_REFUSED_KEEP)
MAX_PENDING_REFUSALS = 64
TIMEOUT_SECONDS = 0.5
# How long a change waits for a replica of Redis to confirm its copy (WAIT), within TIMEOUT_SECONDS.
REPLICA_WAIT_SECONDS = 0.25
MAX_WARNINGS = 64  # answers not yet collected by the Admin API (each is collected at once)


ATTEMPTS = 16  # transactions WATCH found raced, or a Cluster redirected or asked to wait, before giving up


@dataclass(frozen=True, slots=True)
class FleetKeys:
    """The Redis keys of the fleet's state: the state (a head, from format 2: shared_head.py), the sorted sets
    of its audit beside it, and the prefix of the replicas' reports."""

    modes: str
    replica_prefix: str
    audit: str
    refused: str


KEYS = FleetKeys(KEY, REPLICA_PREFIX, KEY + ":audit", KEY + ":refused")
CLUSTER_KEYS = FleetKeys(
    "{argwatch:modes}", "{argwatch:modes}:replica:", "{argwatch:modes}:audit", "{argwatch:modes}:refused"
)

T = TypeVar("T")
# A change of the fleet's state, computed on Redis's document with what only this replica holds added:
# (the document after it, the audit entries it adds, what to return).
Change = Callable[[ModeDocument], tuple[ModeDocument, list[ModeChange], T]]


class UncertainCommit(RedisError):
    """EXEC was sent and its reply never came: Redis may hold the change or not (the state is read again)."""


@dataclass(frozen=True, slots=True)
class SharedRead:
    """The fleet's state as one read found it."""

    document: ModeDocument | None  # the whole state; None when the key holds none argwatch wrote
    head: Head | None  # its head, when stored as one (format 2)
    followed: bool  # made from this replica's synced document and the head's new entries (nothing missing)
    new: list[ModeChange] | None = None  # those entries, when followed


@dataclass(frozen=True, slots=True)
class Committed:
    """What a transaction wrote, for what follows it once its connection is given back."""

    document: ModeDocument
    entries: list[ModeChange]
    base: ModeDocument
    base_new: list[ModeChange] | None  # the entries `base` adds to `local`, when the read followed the head
    local: ModeDocument  # this replica's document the transaction read
    head: Head | None  # the head written (None: a whole document, format 1)
    unconfirmed: str
    result: Any


AGAIN = object()  # a transaction WATCH found raced: read again, compute again


class SharedModes:
    """Keeps a ModeStore in step with the fleet's shared state in Redis."""

    def __init__(
        self,
        store: ModeStore,
        url: str,
        metrics: GatewayMetrics,
        *,
        replica_id: str,
        report: Callable[[], Mapping[str, Any]],
        clock: Callable[[], float] = time.time,
        stored_format: int = FORMAT,
    ) -> None:
        """`stored_format`: the newest format of the shared state this replica reads and writes; 1 is what
        releases before format 2 read and write, kept for fleets mid-deploy (and their tests)."""
        self._store = store
        self._metrics = metrics
        self._replica_id = replica_id
        self._report = report
        self._clock = clock
        self.kind = "redis"
        target = parse_redis_url(url)
        self._url = url  # for describe_error, which never shows its password
        self._redis: RedisClient = redis_client(url, timeout=TIMEOUT_SECONDS, connect_timeout=TIMEOUT_SECONDS)
        # No read timeout on the subscriber: it waits for announcements.
        self._subscriber: RedisClient = redis_client(url, timeout=None, connect_timeout=TIMEOUT_SECONDS)
        self._keys = CLUSTER_KEYS if target.kind is RedisKind.CLUSTER else KEYS
        # A Sentinel deployment exists to fail over: every change waits for a replica's copy. A Cluster's
        # primary is asked only when it has replicas (WAIT would otherwise always wait in vain).
        self._sentinel = target.kind is RedisKind.SENTINEL
        self._warnings: dict[ModeChange, str] = {}
        self._unconfirmed = ""  # why the last transaction's change may not survive a failover ("" if it will)
        self._lock = asyncio.Lock()  # one transaction at a time from this replica
        self._subscribed = asyncio.Event()
        self._rereading = asyncio.Lock()
        self._stored_format = stored_format
        self._reader = StateReader(SHARED_AUDIT_KEEP + SHARED_REFUSED_KEEP, heads=stored_format >= FORMAT)
        self._synced: Synced | None = None  # the last state this replica and the fleet's agreed on, as a head
        self._fleet_reads_heads = False  # every replica that reported said it reads format 2
        self._bad_sets: set[str] = set()  # audit sets read, or written to, as not argwatch's: written whole next
        self._head_asked = False  # the source answered ASK to the read of the head itself (the attempt under way)
        self._repairing: asyncio.Task[None] | None = None  # the write _repair_soon asked for
        self._asking: tuple[str, int] | None = None  # the node of an ASK the attempt under way runs on
        self._reporting: asyncio.Task[None] | None = None  # makes the reports asked for (_report_soon)
        self._report_asked: asyncio.Future[None] | None = None  # the next report's, asked for and not started
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._pubsub: PubSub | None = None  # the subscription being listened to, closed by close()
        self.connected = False
        self.last_error = ""
        self._fleet: dict[str, dict[str, Any]] = {}  # replica id -> its last report (with "seen_at")
        metrics.mode_store_connected(False)

    # ---- lifecycle

    async def start(self) -> None:
        """Reads the shared state once (a Redis that does not answer is reported, not fatal), then follows it."""
        await self.reread()
        loop = asyncio.get_running_loop()
        self._tasks += [loop.create_task(self._listen_forever()), loop.create_task(self._reread_forever())]
        # Serve only once subscribed, or a change made right after start waits for the periodic re-read.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2 * TIMEOUT_SECONDS):
                await self._subscribed.wait()

    async def close(self) -> None:
        self._closing = True
        tasks = [*self._tasks, *([self._reporting] if self._reporting is not None else [])]
        for task in tasks:
            task.cancel()
        _done, running = await asyncio.wait(tasks, timeout=TIMEOUT_SECONDS) if tasks else ((), ())
        if self._report_asked is not None and not self._report_asked.done():
            self._report_asked.set_result(None)  # asked for while the report task was being cancelled
        if running and self._pubsub is not None:
            # A listener that outlived its cancellation: redis-py's subscription on a Cluster node lost it about
            # one stop in ten (tests/service/test_redis_cluster.py), and read on. Its connection closed, the
            # read fails and the listener, seeing the close, ends.
            with contextlib.suppress(*STORE_ERRORS):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            _done, running = await asyncio.wait(running, timeout=TIMEOUT_SECONDS)
        if running:
            log.error("modes: %d task(s) did not stop with the shared mode store; left behind", len(running))
        with contextlib.suppress(*STORE_ERRORS):
            await self._redis.delete(self._keys.replica_prefix + self._replica_id)  # leave the fleet view at once
        try:
            await close_client(self._redis)
        finally:  # the subscriber's connections closed too, whatever the first client's close raised
            await close_client(self._subscriber)

    # ---- what the Admin API and the app call

    async def set_mode(
        self,
        target: str,
        mode: Mode | None,
        *,
        actor: str,
        reason: str,
        expires_in: float | None = None,
        check: str = "",
    ) -> ModeChange:
        """A mode change made for the whole fleet; ModeRefused when refused, or when Redis is unreachable."""
        request = OverrideRequest(Target(target, check), mode, actor, reason, expires_in)

        def change(base: ModeDocument) -> tuple[ModeDocument, list[ModeChange], ModeChange]:
            document, entry = doc.apply(base, request, self._store.policy_modes, self._store.now())
            return document, [entry], entry

        try:
            entry = await self._transact(change, confirm=True)
            if entry.refused:  # audited fleet-wide, like every refusal
                raise ModeRefused(entry.outcome.removeprefix("refused: "))
            if self._unconfirmed:  # read before any other await: it is this change's
                while len(self._warnings) >= MAX_WARNINGS:
                    del self._warnings[next(iter(self._warnings))]
                self._warnings[entry] = self._unconfirmed
            return entry
        except UncertainCommit as error:
            self._down(error)
            # Not audited as refused here: it may have been made. The fleet's audit, read again, says.
            raise ModeRefused(
                f"the shared mode store (Redis) did not confirm the change in time ({error}): it may have been "
                "made; this replica reads the fleet's state again, and the audit will show it if it was"
            ) from None
        except STORE_ERRORS as error:
            self._down(error)
            refusal = (
                "the shared mode store (Redis) is unreachable, so the change would reach only this replica: "
                + self.last_error
            )
            self._store.record_refusal(actor, refusal)
            raise ModeRefused(refusal) from None

    def record_refusal(self, actor: str, reason: str) -> None:
        """Audits a refused call fleet-wide (in the background; locally only while Redis is down). At most
        MAX_PENDING_REFUSALS wait for Redis at once; past that one is audited on this replica only."""
        self._tasks = [task for task in self._tasks if not task.done()]
        if len(self._tasks) >= MAX_PENDING_REFUSALS:
            self._store.record_refusal(actor, reason)
            return
        self._tasks.append(asyncio.get_running_loop().create_task(self._record_refusal(actor, reason)))

    async def audit(self, change: ModeChange) -> None:
        try:
            await self._transact(lambda base: (doc.record(base, change), [change], None))
        except STORE_ERRORS as error:
            self._down(error)
            self._store.audit(change)  # on this replica at least; the fleet's copy catches up when Redis is back

    async def expire_due(self) -> None:
        if not self._store.has_due():
            return

        def expire(base: ModeDocument) -> tuple[ModeDocument, list[ModeChange], None]:
            return (*doc.expire(base, self._store.policy_modes, self._store.now()), None)

        try:
            await self._transact(expire)
        except STORE_ERRORS as error:
            self._down(error)
            self._store.expire_due()  # time-based: every replica reverts the same override by itself

    def durability_warning(self, change: ModeChange) -> str:
        """Why `change` (just returned by set_mode) may not survive a failover of Redis; "" when a replica
        of Redis confirmed its copy, or when nothing fails over (one Redis, a Cluster without replicas)."""
        return self._warnings.pop(change, "")

    def status(self) -> tuple[bool, str]:
        return self.connected, self.last_error

    def fleet(self) -> list[dict[str, Any]]:
        """Every replica that reported, newest report first; each with "seen_at" and "reporting"."""
        now = self._clock()
        listed = []
        for report in self._fleet.values():
            # This replica is alive whatever Redis says; the others are as last seen.
            fresh = now - report["seen_at"] <= REPORT_TTL_SECONDS or report.get("replica_id") == self._replica_id
            listed.append({**report, "reporting": fresh})
        return sorted(listed, key=lambda r: r.get("replica_id", ""))

    # ---- following the shared state

    async def reread(self) -> None:
        """Adopts the shared state if it holds all of ours and differs, adds what it lacks of ours to it
        (merge.py) if it lacks anything (or holds none), reports this replica and reads the others' reports."""
        if await self._reread_state():
            # Through the one reporting task (two reports at once could land out of order), and shielded: a
            # re-read cancelled does not cancel a report others asked for.
            await asyncio.shield(self._report_soon())

    async def _follow_announcement(self, data: object) -> None:
        """reread() for an announcement: the state at once, the report after it by the reporting task. The
        report is three more round trips (SET, SCAN, MGET); awaited here, each change's announcement queued
        behind the last one's report, and a burst of flips during an incident reached the other replicas
        one report late each. An announcement of a head carries the head written, which a replica holding
        what it follows takes its new entries from without reading Redis; any other (a version: format 1)
        is followed by reading the state."""
        if (isinstance(data, bytes) and await self._followed(data)) or await self._reread_state():
            self._report_soon()

    async def _followed(self, announced: bytes) -> bool:
        """Whether the head announced was followed: its new entries taken, or none new. False when this
        replica cannot tell from it alone (it holds what Redis may lack, it is behind by more than the head
        holds, or the announcement is older than what it read since): then it reads the state."""
        if self._stored_format < FORMAT or not announced.startswith(b"{") or b'"log":' not in announced:
            return False  # a version (format 1), or not a head: read the state (a whole document is not parsed)
        async with self._rereading, self._lock:
            head, synced = self._readable(announced), self._synced
            if not isinstance(head, Head) or synced is None or synced.document is not self._store.document:
                return False
            if passed(synced, head):
                return True  # an announcement that arrived after this replica read a newer state
            new = new_since(synced, head)
            if new is None:
                return False
            document = followed(synced, head, new, SHARED_KEEP)
            if document is not synced.document:
                self._store.adopt(document, new)
            self._synced = Synced(document, head)
            return True

    async def _reread_state(self) -> bool:
        """The state part of reread(): whether Redis answered (the report follows only then; the store is
        reported reachable once the report went through too, as when the two were one)."""
        # One at a time, each with a fresh read: an overlapping one would judge by a read older than the other's.
        async with self._rereading:
            try:
                # Under the transaction lock: a change of this replica committed between the read and the
                # comparison would make Redis look as if it lacked it ("wrote them back" while Redis was healthy).
                async with self._lock:
                    read: SharedRead = await self._on_primary(self._read_state_once)
                    shared, local = read.document, self._store.document
                    if read.followed:  # the usual case: the new entries of the head, nothing missing here
                        if shared is not local:
                            self._store.adopt(shared, read.new)  # type: ignore[arg-type]  # a followed read has one
                        self._synced = Synced(self._store.document, read.head)  # type: ignore[arg-type]
                        return True
                    missing = local.entries() if shared is None else missing_from(shared, local, SHARED_KEEP)
                    if missing or (shared is None and local.version):
                        # Redis restarted empty, lost changes in a failover, or was away while this replica
                        # audited by itself: what it lacks is added to what it holds (merge), never written over it.
                        await self._transact_locked(lambda base: (base, [], None))
                        log.warning(
                            "modes: the shared store lacked %d entries this replica holds; wrote them back",
                            len(missing),
                        )
                    elif shared is not None:
                        if self._differs(shared):
                            self._store.adopt(shared)  # it holds all of ours, and more: another replica's changes
                            log.info("modes: adopted the fleet's state, version %d", shared.version)
                        self._synced = Synced(self._store.document, read.head) if read.head is not None else None
                return True
            except STORE_ERRORS as error:
                self._down(error)
                return False

    def _report_soon(self) -> asyncio.Future[None]:
        """Asks the reporting task for a report; done once a report that started after this ask has been made
        or failed. One report at a time: asked for while one is on its way, one more follows it (each reads
        this replica's state when it starts, so the last one written is the newest)."""
        loop = asyncio.get_running_loop()
        if self._report_asked is None:
            self._report_asked = loop.create_future()
        asked = self._report_asked
        if self._closing:
            asked.set_result(None)  # nothing is reported once closing; no one waits for it
            self._report_asked = None
        elif self._reporting is None or self._reporting.done():
            self._reporting = loop.create_task(self._report_while_asked())
        return asked

    async def _report_while_asked(self) -> None:
        while (asked := self._report_asked) is not None:
            self._report_asked = None
            try:
                if not self._closing:
                    if self._keys is CLUSTER_KEYS:
                        # On a Cluster the report's keys share the modes key's slot, and redis-py's following
                        # of a migrating slot's redirections, overlapping, ran out of attempts ("TTL
                        # exhausted"): there a report and a read take turns, as when they were one call.
                        async with self._rereading:
                            await self._publish_report()
                    else:
                        await self._publish_report()
                    self._up()
            except STORE_ERRORS as error:
                self._down(error)
            except Exception:  # a report that cannot be made must not end the reports asked after it
                log.exception("modes: reporting this replica to the fleet view failed")
            finally:
                if not asked.done():
                    asked.set_result(None)

    def _differs(self, shared: ModeDocument) -> bool:
        """Whether Redis holds another state than this replica's, as Redis keeps it (compared as they are,
        not as JSON: this runs on every re-read and announcement)."""
        local = self._store.document
        audit, refused = SHARED_KEEP
        return (
            shared.version != local.version
            or dict(shared.overrides) != dict(local.overrides)
            or shared.audit[-audit:] != local.audit[-audit:]
            or shared.refused[-refused:] != local.refused[-refused:]
        )

    def _readable(self, raw: bytes | str | None) -> Head | ModeDocument | None:
        """The fleet's state as stored, if it is one (a head, or a whole document of format 1): anything else
        in the key (not JSON, another shape) is counted and read as no state, so this replica writes its own
        back over it."""
        if not raw:
            return None
        try:
            return self._reader.read(raw if isinstance(raw, bytes) else raw.encode())
        except (orjson.JSONDecodeError, TypeError, ValueError, KeyError) as error:
            self._rejected(error)
            return None

    def _rejected(self, error: Exception) -> None:
        self._metrics.shared_cache_rejected("bad_mode_state")
        log.warning("modes: ignoring the shared state in Redis, which argwatch did not write (%s)", error)

    async def _read_state(self, send: Commands, *, watching: bool) -> SharedRead | None:
        """The fleet's state: from the head alone when this replica holds what the head's new entries follow
        (shared_head.py), else from the head and the sets whole, read together (in a transaction; under the
        WATCH of `watching`, with the head read again after them). None when another transaction wrote
        between (which the WATCH refuses too): read again."""
        key = self._keys.modes
        try:
            *_, raw = await send(*((("WATCH", key),) if watching else ()), ("GET", key))
        except AskError:
            self._head_asked = self._asking is None  # the source lacks the head itself
            raise
        if raw is None and self._asking is not None and not self._head_asked:
            # The node an ASK sent this attempt to (its slot importing) lacks the head, which the source answered
            # for: only another key of the slot moved. Read as "no state", a change would be made here on this
            # replica's copy alone, beside the fleet's head.
            raise TryAgainError("the slot of the mode state is split between two primaries mid-migration")
        found = self._readable(raw)
        if not isinstance(found, Head):
            return SharedRead(found, None, False)
        synced = self._synced
        if synced is not None and synced.document is self._store.document:
            new = new_since(synced, found)
            if new is not None:
                return SharedRead(followed(synced, found, new, SHARED_KEEP), found, True, new)
        # Only the parts that ever held an entry this epoch (a set never written does not exist, and on a Cluster
        # a key that does not exist in a migrating slot is answered ASK); of those, the newest the fleet keeps
        # (by score, its time), whatever else a set holds.
        parts = [
            ("ZRANGE", name, -most, -1)
            for name, most, count in zip((self._keys.audit, self._keys.refused), SHARED_KEEP, found.counts, strict=True)
            if count
        ]
        if watching:
            # After the GET, not in a transaction (EXEC would end the WATCH), one at a time (an error reply of
            # one must not cost the other's): the head read again after them says whether a transaction wrote
            # between (every write changes the head: its version).
            listed = [await self._members(send, part) for part in parts]
            (again,) = await send(("GET", key))
        else:
            *_, (again, *listed) = await send(("MULTI",), ("GET", key), *parts, ("EXEC",))
        if again != raw:
            return None
        return SharedRead(with_sets(found, self._entries_of(found, parts, listed)), found, False)

    @staticmethod
    async def _members(send: Commands, part: tuple[Any, ...]) -> Any:
        """A set's members, or the error reply of a key of another type (as EXEC returns it)."""
        try:
            (members,) = await send(part)
        except ResponseError as error:
            if isinstance(error, AskError | MovedError | TryAgainError) or not str(error).startswith("WRONGTYPE"):
                raise
            return error
        return members

    def _entries_of(self, head: Head, parts: list[tuple[Any, ...]], listed: list[Any]) -> list[ModeChange]:
        """The entries of the sets as read; for a set that is not one argwatch wrote (another type under its
        key, or a member of another shape), the head's newest of that part: counted, and that set written
        whole by a write soon (_repair_soon)."""
        by_key = dict(zip((part[1] for part in parts), listed, strict=True))
        entries: list[ModeChange] = []
        for part, name, recent in zip(LISTS, (self._keys.audit, self._keys.refused), head.recent, strict=True):
            members = by_key.get(name, [])
            try:
                if isinstance(members, Exception):
                    raise TypeError(f"an audit set of another type ({members})")
                entries += entries_from_set(part, members)
            except (orjson.JSONDecodeError, TypeError, ValueError, KeyError) as error:
                self._rejected(error)
                self._bad_sets.add(name)
                self._repair_soon()
                entries += recent
        return entries

    async def _read_state_once(self, send: Commands) -> SharedRead | object:
        read = await self._read_state(send, watching=False)
        return AGAIN if read is None else read

    async def _on_primary(self, body: Callable[[Commands], Awaitable[T | object]]) -> T:
        """`body` run on a connection to the primary that holds the state, again after a Cluster's MOVED or
        ASK, or when it returns AGAIN (a transaction that WATCH found raced)."""
        asking: tuple[str, int] | None = None  # the node an ASK named: the key's slot is migrating there
        attempt = 0
        self._head_asked = False
        for _ in range(ATTEMPTS):
            try:
                self._asking = asking
                async with pinned_connection(self._redis, self._keys.modes, asking) as send:
                    result = await body(send)
            except MovedError:
                # The Cluster moved the key's slot (a failover or resharding) before anything was written (a
                # command queued in MULTI and refused aborts EXEC): pinned_connection learnt the Cluster's
                # layout again, so the next attempt reaches the slot's new primary.
                asking = None
                continue
            except AskError as redirected:
                # The slot is being migrated and the key has already gone to the node named: the next attempt
                # runs there, each command after ASKING (the source answers ASK until the migration ends).
                asking = (redirected.host, redirected.port)
                continue
            except TryAgainError:
                # Mid-migration, some of the state's keys moved and others not yet (a resharding moves a few
                # keys a MIGRATE): the importing node refuses a command naming both until the rest arrive, and
                # the source sends a command for a moved one there. From the source again, after a pause.
                asking, self._head_asked = None, False
                attempt += 1
                await asyncio.sleep(backoff_delay(attempt, base=0.01, cap=0.1))
                continue
            finally:
                self._asking = None
            if result is not AGAIN:
                return result  # type: ignore[return-value]  # anything but AGAIN is body's T
        raise RedisError(f"the shared mode state kept changing under us ({ATTEMPTS} attempts)")

    async def _transact(self, change: Change[T], *, confirm: bool = False) -> T:
        async with self._lock:
            return await self._transact_locked(change, confirm=confirm)

    async def _transact_locked(self, change: Change[T], *, confirm: bool = False) -> T:
        """The body of _transact, run with self._lock held: the change is computed on Redis's document with
        what only this replica holds added (merge.py), written back in one transaction, and only then put in
        force here. Nothing is changed here before Redis has it, so nothing is rolled back. `confirm`: wait
        for a replica of Redis (WAIT) and keep why it did not confirm in self._unconfirmed; only a change
        whose answer says so waits, so an audit, a refusal or an expiry never holds the lock for it."""

        async def attempt(send: Commands) -> Committed | object:
            read = await self._read_state(send, watching=True)
            if read is None:
                await send(("UNWATCH",))
                return AGAIN
            shared, local = read.document, self._store.document
            # Redis's, with what only this replica holds added (merge.py): never ours over Redis's.
            base = local if shared is None else shared if read.followed else merge(shared, local, SHARED_KEEP)
            document, entries, result = change(base)
            commands, head, payload = self._writes(read, base, document, entries)
            rewritten_sets = {command[1] for command in commands if command[0] == "DEL"}
            try:
                *_, committed = await send(*commands)
            except (RedisConnectionError, RedisTimeoutError, OSError) as error:
                # EXEC may have reached Redis (a paused or slow Redis) and its reply not come back:
                # retrying would apply the change a second time. The next read takes whatever Redis holds
                # (nothing of it is in force here, so nothing of it is missing from Redis).
                raise UncertainCommit(str(error) or type(error).__name__) from None
            if committed is None:  # another replica changed it meanwhile (WATCH): read again, compute again
                if (
                    read.head is not None
                    and not read.followed
                    and base is shared
                    and shared is not None
                    and self._store.document is local  # nothing audited here alone meanwhile
                ):
                    # Read whole, holding all of ours: followed from, the next attempt reads the head alone.
                    # (Read whole again, its longer read lost the race to a replica reading heads, over and
                    # over: ten attempts in a burst of flips through two replicas.)
                    if self._differs(shared):
                        self._store.adopt(shared)
                    self._synced = Synced(self._store.document, read.head)
                return AGAIN
            queued = [command for command in commands if command[0] not in ("MULTI", "EXEC")]
            replies = zip(queued, committed, strict=True)
            failed = {command[1]: reply for command, reply in replies if isinstance(reply, Exception)}
            if failed:
                # Redis runs the rest of a transaction past a command that fails (a set of another type under
                # its key, written by someone else): the head is written and that set lacks the entry. Counted,
                # and that set written whole by a write this replica makes at once (_repair_soon).
                self._rejected(next(iter(failed.values())))
                self._bad_sets |= set(failed) & {self._keys.audit, self._keys.refused}
            elif head is not None:
                self._reader.wrote(payload, head)
                self._bad_sets -= rewritten_sets
            else:
                self._reader.wrote_document(payload, as_written(document, SHARED_KEEP))
            unconfirmed = await self._confirmed_by_replica(send, self._keys.modes) if confirm else ""
            return Committed(document, entries, base, read.new, local, head, unconfirmed, result)

        done: Committed = await self._on_primary(attempt)
        local = done.local
        self._unconfirmed = done.unconfirmed
        # In force here: grown from Redis's document and ours merged. What this replica audited by itself
        # while EXEC was in flight (a refusal past MAX_PENDING_REFUSALS, a fallback) is kept on top: Redis
        # gets it at the next re-read, which finds it missing there.
        document, base, meanwhile = done.document, done.base, []
        if self._store.document is not local:
            before = set(local.entries())
            meanwhile = [entry for entry in self._store.document.entries() if entry not in before]
            for entry in meanwhile:
                document, base = doc.record(document, entry), doc.record(base, entry)
        # The entries `meanwhile` were journalled and logged when audited here, and are in the base the state
        # file takes (written whole, it would lose them); only the change's entries are journalled now.
        self._store.commit(document, done.entries, base=base, adopted=done.base_new)
        if self._bad_sets and done.head is not None:  # a set met by this write is not all in Redis
            self._synced = None
            self._repair_soon()
        else:
            self._synced = Synced(document, done.head) if done.head is not None and not meanwhile else None
        self._up()
        return done.result  # type: ignore[no-any-return]  # change's T

    def _writes(
        self, read: SharedRead, base: ModeDocument, document: ModeDocument, entries: list[ModeChange]
    ) -> tuple[list[tuple[Any, ...]], Head | None, bytes]:
        """The transaction that stores `document` (made from `base` by adding `entries`): a head and the
        entries added to the sets when every replica reads heads (the sets written whole when what was read
        was not a head, or lacked something of this replica's), and a whole document (format 1) while a
        replica that reads only that one reports to the fleet."""
        keys = self._keys
        if not (self._stored_format >= FORMAT and self._fleet_reads_heads):
            payload = orjson.dumps(doc.to_json(document, *SHARED_KEEP))
            announced = ("PUBLISH", CHANNEL, str(document.version))  # what a release before format 2 announces
            return [("MULTI",), ("SET", keys.modes, payload), announced, ("EXEC",)], None, payload
        parts = ((keys.audit, SHARED_AUDIT_KEEP, document.audit), (keys.refused, SHARED_REFUSED_KEEP, document.refused))
        commands: list[tuple[Any, ...]] = [("MULTI",)]
        if read.head is not None and base is read.document:
            head = appended(read.head, entries, document)
            for (name, most, held), added in zip(parts, split(entries), strict=True):
                if name in self._bad_sets:  # not argwatch's when read or written: written whole, DEL first
                    commands += [("DEL", name), *_scored(name, list(held[-most:]), most)]
                else:
                    commands += _scored(name, added, most)
        else:
            head, *whole = rewritten(document, SHARED_KEEP)
            for (name, most, _), added in zip(parts, whole, strict=True):
                commands += [("DEL", name), *_scored(name, added, most)]
        payload = head_json(head)
        # The head announced with it: a replica that follows takes it from the announcement, without a read.
        return [*commands, ("SET", keys.modes, payload), ("PUBLISH", CHANNEL, payload), ("EXEC",)], head, payload

    async def _confirmed_by_replica(self, send: Commands, key: str) -> str:
        """Asks for one replica's copy of what this connection just wrote (WAIT), where Redis fails over;
        "" when a replica confirmed it or nothing fails over, else why the change may be lost."""
        if not self._sentinel and not self._cluster_replicated(key):
            return ""
        try:
            (copies,) = await send(("WAIT", 1, int(REPLICA_WAIT_SECONDS * 1000)))
        except STORE_ERRORS as error:
            copies, reason = 0, f"asking for it failed: {error or type(error).__name__}"
        else:
            reason = f"none answered within {REPLICA_WAIT_SECONDS:g}s"
        if copies:
            return ""
        log.warning("modes: no replica of Redis confirmed the change (%s); a failover now would undo it", reason)
        return (
            f"the change is in force on every replica, but no replica of Redis confirmed its copy ({reason}): "
            "a failover of Redis before one copies it would undo it; check the audit after any failover"
        )

    def _cluster_replicated(self, key: str) -> bool:
        """Whether the Cluster primary that holds `key` has replicas (as the client last learnt)."""
        client = self._redis
        if not isinstance(client, RedisCluster):
            return False
        return len(client.nodes_manager.slots_cache.get(client.keyslot(key), [])) > 1

    async def _record_refusal(self, actor: str, reason: str) -> None:
        try:
            entry = refusal_entry(self._store.now(), actor, reason)
            await self._transact(lambda base: (doc.record(base, entry), [entry], None))
        except STORE_ERRORS as error:
            self._down(error)
            self._store.record_refusal(actor, reason)

    async def _publish_report(self) -> None:
        now = self._clock()
        report = {**self._report(), "replica_id": self._replica_id, "at": now}
        if self._stored_format >= FORMAT:  # a release before format 2 says nothing: read as 1
            report["mode_format"] = self._stored_format
        prefix = self._keys.replica_prefix
        await self._redis.set(prefix + self._replica_id, orjson.dumps(report), px=int(REPORT_TTL_SECONDS * 1000))
        keys = [key async for key in self._redis.scan_iter(match=prefix + "*", count=100)]
        values = await self._redis.mget(keys) if keys else []
        formats = []
        for value in values:
            try:
                found = orjson.loads(value) if value else None
                if isinstance(found, dict) and isinstance(found.get("replica_id"), str):
                    self._fleet[found["replica_id"]] = {**found, "seen_at": float(found.get("at", now))}
                    formats.append(found.get("mode_format", 1))
            except (orjson.JSONDecodeError, TypeError, ValueError):
                self._metrics.shared_cache_rejected("bad_replica_report")
        # Heads only while every replica reporting now reads them (shared_head.py): a report expires, or is
        # deleted, when its replica stops, so one that stopped holds nothing back for long.
        reads_heads = bool(formats) and all(isinstance(f, int) and f >= FORMAT for f in formats)
        if reads_heads != self._fleet_reads_heads:
            log.info("modes: every replica reports reading format %d: %s", FORMAT, "yes" if reads_heads else "no")
            if not reads_heads and self._stored_format >= FORMAT:
                # A replica that reads only whole documents reports (one rolled back to, or late): the state
                # is written whole at once, not at the next change, which may come after the last replica
                # that holds the whole audit stopped (the old one read the newest entries of a head only).
                self._tasks = [task for task in self._tasks if not task.done()]
                self._tasks.append(asyncio.get_running_loop().create_task(self._write_again(only_over_a_head=True)))
        self._fleet_reads_heads = reads_heads
        if reads_heads and self._bad_sets:
            self._repair_soon()  # asked for before this replica knew it would write heads
        for replica_id, found in list(self._fleet.items()):
            if now - found["seen_at"] > FORGET_STOPPED_SECONDS:
                del self._fleet[replica_id]

    def _repair_soon(self) -> None:
        """Writes the sets in _bad_sets whole in the background, once, while the fleet writes heads (the first
        head written over a whole document writes them whole anyway)."""
        self._tasks = [task for task in self._tasks if not task.done()]
        if not self._closing and (self._repairing is None or self._repairing.done()):
            self._repairing = asyncio.get_running_loop().create_task(self._write_again(repair=True))
            self._tasks.append(self._repairing)

    async def _write_again(self, *, only_over_a_head: bool = False, repair: bool = False) -> None:
        """The state written again as this replica holds it: whole, when an old replica reports
        (`only_over_a_head`: unless another replica did already), or the sets in _bad_sets whole (`repair`)."""
        try:
            if repair and not (self._bad_sets and self._stored_format >= FORMAT and self._fleet_reads_heads):
                return  # repaired meanwhile, or not a head this replica would write (_publish_report asks again)
            if only_over_a_head:  # another replica may have written it whole already
                raw = await self._redis.get(self._keys.modes)
                if not isinstance(self._readable(raw), Head):
                    return
            await self._transact(lambda base: (base, [], None))
        except STORE_ERRORS as error:
            self._down(error)  # the next change writes it, as every change does

    async def _listen_forever(self) -> None:
        attempt = 0
        while not self._closing:
            try:
                async with subscription(self._subscriber) as pubsub:
                    self._pubsub = pubsub
                    await pubsub.subscribe(CHANNEL)
                    self._subscribed.set()
                    attempt = 0
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            await self._follow_announcement(message.get("data"))
            except STORE_ERRORS as error:
                if self._closing:
                    return
                self._down(error)
            except Exception:  # a value in Redis argwatch did not write must not end the following
                if self._closing:
                    return
                log.exception("modes: following the announcements failed; subscribing again")
            attempt += 1
            # Jittered, so replicas that lost Redis together do not all return at the same instant.
            await asyncio.sleep(backoff_delay(attempt, base=0.2, cap=5.0))

    async def _reread_forever(self) -> None:
        while True:
            await asyncio.sleep(REREAD_SECONDS)
            try:
                await self.reread()
            except Exception:  # whatever Redis holds, following the fleet must not stop for good
                log.exception("modes: re-reading the shared state failed; trying again")

    def _up(self) -> None:
        if not self.connected:
            log.info("modes: the shared mode store (Redis) answers")
        self.connected, self.last_error = True, ""
        self._metrics.mode_store_connected(True)

    def _down(self, error: BaseException) -> None:
        why = describe_error(error, self._url)
        if self.connected or not self.last_error:
            log.warning("modes: the shared mode store (Redis) is unreachable; enforcing the last modes known: %s", why)
        self.connected, self.last_error = False, why
        self._metrics.mode_store_connected(False)


def _scored(name: str, entries: list[ModeChange], most: int) -> list[tuple[Any, ...]]:
    """The commands that add `entries` to the sorted set `name`, scored by time, and cut it to its newest `most`."""
    if not entries:
        return []
    scored = [part for entry in entries for part in (entry.at, entry_json(entry))]
    return [("ZADD", name, *scored), ("ZREMRANGEBYRANK", name, 0, -most - 1)]
