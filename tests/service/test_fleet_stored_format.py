"""A fleet mid-deploy between releases that store the mode state differently (shared_head.py): the fleet writes the
whole document (format 1) while a replica that reads only that one reports, a head and sorted sets once none does,
and no change or audit entry is lost either way, rolling forward or back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes import fleet as fleet_module
from argwatch.server.modes.fleet import KEY, SharedModes
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode
from argwatch.server.telemetry.metrics import GatewayMetrics
from tests.redis_server import RedisProcess, ask, start_redis
from tests.service.helpers import eventually, stored_audit, value

POLICY = parse_policy(b"tools: {refund_order: {mode: reject}, lookup: {mode: observe}}\n", "/p.yaml")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


class Fleet:
    """Replicas of SharedModes on one Redis; format 1 ones do what a release before format 2 does."""

    def __init__(self, redis: RedisProcess) -> None:
        self.redis = redis
        self.replicas: dict[str, SharedModes] = {}
        self.stores: dict[str, ModeStore] = {}
        self.registries: dict[str, CollectorRegistry] = {}

    async def start(self, name: str, stored_format: int = 2, state_file: str | None = None) -> SharedModes:
        store = ModeStore(POLICY, state_file=state_file)
        self.registries[name] = CollectorRegistry()
        replica = SharedModes(
            store,
            self.redis.url,
            GatewayMetrics(self.registries[name]),
            replica_id=name,
            report=dict,
            stored_format=stored_format,
        )
        await replica.start()
        self.replicas[name], self.stores[name] = replica, store
        return replica

    async def stop(self, name: str) -> None:
        await self.replicas.pop(name).close()
        del self.stores[name]

    async def settle(self) -> None:
        """Every replica re-reads and reports twice: each has read every other's report and the last state."""
        for _ in range(2):
            for replica in self.replicas.values():
                await replica.reread()

    def stored_format(self) -> int:
        raw = ask(self.redis.port, "GET", KEY)
        assert isinstance(raw, bytes)
        return 2 if "log" in orjson.loads(raw) else 1

    def agree_on(self, reasons: list[str]) -> None:
        for name, store in self.stores.items():
            assert sorted(entry.reason for entry in store.document.audit) == sorted(reasons), name
        assert sorted(entry["reason"] for entry in stored_audit(self.redis.port)) == sorted(reasons)
        assert len({store.mode_for("refund_order") for store in self.stores.values()}) == 1
        assert len({store.version for store in self.stores.values()}) == 1


@pytest.fixture
async def fleet(redis: RedisProcess) -> AsyncIterator[Fleet]:
    started = Fleet(redis)
    yield started
    for name in list(started.replicas):
        await started.stop(name)


async def flip(replica: SharedModes, number: int) -> str:
    reason = f"CHG-{number}"
    mode = Mode.OBSERVE if number % 2 else Mode.REJECT
    await replica.set_mode("refund_order", mode, actor="ana", reason=reason)
    return reason


async def test_a_rolling_deploy_writes_whole_documents_until_the_last_old_replica_stops(fleet: Fleet) -> None:
    old = await fleet.start("old", stored_format=1)
    reasons = [await flip(old, 0)]
    new = [await fleet.start("new-1"), await fleet.start("new-2")]
    await fleet.settle()
    for number, replica in enumerate([*new, old, *new], start=1):
        reasons.append(await flip(replica, number))
        await fleet.settle()
        assert fleet.stored_format() == 1  # the old replica reports: it reads only whole documents
    fleet.agree_on(reasons)
    versions = {store.version for store in fleet.stores.values()}
    await fleet.stop("old")
    await fleet.settle()
    reasons.append(await flip(new[0], 10))
    await fleet.settle()
    assert fleet.stored_format() == 2  # the first change once none reports wrote the head and the sets
    fleet.agree_on(reasons)
    reasons.append(await flip(new[1], 11))
    await fleet.settle()
    fleet.agree_on(reasons)
    assert max(store.version for store in fleet.stores.values()) <= max(versions) + 4  # no writing back and forth


async def test_a_rollback_an_old_replica_joining_a_fleet_that_writes_heads_loses_nothing(fleet: Fleet) -> None:
    new = [await fleet.start("new-1"), await fleet.start("new-2")]
    await fleet.settle()
    reasons = [await flip(new[number % 2], number) for number in range(40)]  # more than a head holds
    await fleet.settle()
    assert fleet.stored_format() == 2
    old = await fleet.start("old", stored_format=1)
    await fleet.settle()
    # Written whole as soon as the new replicas read its report, with no change made meanwhile: the old replica
    # reads all of the audit, not the head's newest entries, even once every new replica has stopped.
    assert fleet.stored_format() == 1 and len(stored_audit(fleet.redis.port)) == 40
    assert len(fleet.stores["old"].document.audit) == 40
    reasons.append(await flip(old, 40))
    await fleet.settle()
    reasons.append(await flip(new[0], 41))
    await fleet.settle()
    assert fleet.stored_format() == 1
    fleet.agree_on(reasons)
    assert len(stored_audit(fleet.redis.port)) == 42  # the whole audit in the document again


async def test_a_replica_in_step_follows_an_announced_head_without_reading_redis(fleet: Fleet, monkeypatch) -> None:
    """The announcement of a head carries it: a replica holding what it follows takes the new entries from it.
    One that cannot (its own entries Redis may lack) reads the state, and ends in step all the same."""
    writer, follower = await fleet.start("new-1"), await fleet.start("new-2")
    reasons = [await flip(writer, 0)]  # the first change writes the head and the sets: read once by everyone
    await fleet.settle()
    reads: list[int] = []
    reread_state = follower._reread_state

    async def counted() -> bool:
        reads.append(1)
        return await reread_state()

    monkeypatch.setattr(follower, "_reread_state", counted)
    reasons += [await flip(writer, number) for number in range(1, 6)]
    await eventually(lambda: len(fleet.stores["new-2"].changes(1000)) == 6, seconds=5)
    assert reads == []
    fleet.agree_on(reasons)
    fleet.stores["new-2"].record_refusal("eve", "audited here alone (Redis away from this replica)")
    reasons.append(await flip(writer, 6))
    await eventually(lambda: len(reads) == 1, seconds=5)
    await fleet.settle()
    fleet.agree_on(reasons)


async def test_forged_sets_and_heads_are_counted_and_the_fleet_writes_its_state_back(fleet: Fleet) -> None:
    """A member of the audit's sorted set argwatch did not write, or a head holding more than a head holds: read
    as nothing, counted, and the replica's entries written back (the sets written whole again)."""
    writer, reader = await fleet.start("new-1"), await fleet.start("new-2")
    reasons = [await flip(writer, 0)]
    await fleet.settle()
    port, keys = fleet.redis.port, writer._keys
    ask(port, "ZADD", keys.audit, "1", '{"at": 1, "actor": 7}')
    head = orjson.loads(ask(port, "GET", KEY))  # type: ignore[arg-type]
    ask(port, "SET", KEY, orjson.dumps({**head, "log": {**head["log"], "epoch": "forged"}}).decode())
    await reader.reread()  # another epoch: the sets read whole, one member not argwatch's
    assert value(fleet.registries["new-2"], "argwatch_shared_cache_rejected_total", reason="bad_mode_state") >= 1
    # Counted, and written whole again at once (a background write): the forged member gone, the entries there.
    await eventually(lambda: [entry.get("reason") for entry in stored_audit(port)] == reasons, seconds=5)
    head = orjson.loads(ask(port, "GET", KEY))  # type: ignore[arg-type]
    head["audit"] = head["audit"] * 40  # more than a head holds
    ask(port, "SET", KEY, orjson.dumps(head).decode())
    await writer.reread()
    assert value(fleet.registries["new-1"], "argwatch_shared_cache_rejected_total", reason="bad_mode_state") >= 1
    reasons.append(await flip(reader, 1))
    await fleet.settle()
    fleet.agree_on(reasons)


async def test_a_follower_holds_what_the_fleet_keeps_and_journals_each_entry_once(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Following heads, a replica's copy is cut to what the sets keep, as when it took the whole document (not
    grown to the 10,000 it keeps alone, which a state file compared whole per change); its state file gets each
    entry once."""
    monkeypatch.setattr(fleet_module, "SHARED_AUDIT_KEEP", 20)
    monkeypatch.setattr(fleet_module, "SHARED_KEEP", (20, 5))
    writer = await fleet.start("new-1")
    reasons = [await flip(writer, 0)]
    journal = str(tmp_path / "modes.jsonl")
    await fleet.start("new-2", state_file=journal)
    await fleet.settle()
    reasons += [await flip(writer, number) for number in range(1, 30)]
    await eventually(lambda: fleet.stores["new-2"].document.audit[-1].reason == "CHG-29", seconds=5)
    held = fleet.stores["new-2"].document.audit
    assert [entry.reason for entry in held] == reasons[-20:]
    restarted = ModeStore(POLICY, state_file=journal)
    assert [entry.reason for entry in restarted.document.audit] == reasons  # each once, in order


async def test_an_audit_set_of_another_type_is_counted_and_written_whole_again(fleet: Fleet) -> None:
    """Redis runs the rest of a transaction past a command that fails: a string under the audit set's key
    would leave every change's entry out of it. The write that meets it is counted and followed by one that
    writes the sets whole, and a replica started after holds every entry."""
    writer = await fleet.start("new-1")
    reasons = [await flip(writer, 0)]
    await fleet.settle()
    ask(fleet.redis.port, "SET", writer._keys.audit, "not a set")
    reasons += [await flip(writer, number) for number in range(1, 4)]
    await eventually(lambda: ask(fleet.redis.port, "TYPE", writer._keys.audit) == b"zset", seconds=5)
    assert value(fleet.registries["new-1"], "argwatch_shared_cache_rejected_total", reason="bad_mode_state") >= 1
    await fleet.start("new-2")
    await fleet.settle()
    fleet.agree_on(reasons)


async def test_a_set_of_another_type_costs_only_itself_even_for_a_replica_started_after(fleet: Fleet) -> None:
    """The changes' set replaced by a string while no replica runs: a replica started after reads the refusals'
    set whole, takes the head's newest changes for the other, and writes that one alone whole again, as soon
    as it knows it writes heads (its first report read)."""
    writer = await fleet.start("new-1")
    await flip(writer, 0)
    for number in range(40):
        await writer._record_refusal("bob", f"no-{number}")
    await fleet.settle()
    port, keys = fleet.redis.port, writer._keys
    await fleet.stop("new-1")  # the fleet restarted (no state files): Redis holds the audit
    ask(port, "SET", keys.audit, "not a set")
    await fleet.start("new-2")
    await eventually(lambda: ask(port, "TYPE", keys.audit) == b"zset", seconds=5)
    assert ask(port, "ZCARD", keys.refused) == 40
    raw = ask(port, "GET", KEY)
    assert isinstance(raw, bytes) and b'"log"' in raw  # still a head
    assert len(fleet.stores["new-2"].document.refused) == 40
    assert [entry["reason"] for entry in stored_audit(port)] == ["CHG-0"]
