"""What a replica audited by itself is kept, and never written over another's: during a transaction, and while
Redis was away from it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument, OverrideRequest, Target
from argwatch.server.modes.fleet import KEY, SharedModes
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode
from argwatch.server.telemetry.metrics import GatewayMetrics
from tests.redis_server import RedisProcess, ask, start_redis

POLICY = parse_policy(b"tools: {refund_order: {mode: reject}}\n", "/p.yaml")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


async def test_a_refusal_audited_locally_during_a_transaction_is_not_lost(tmp_path: Path, redis: RedisProcess) -> None:
    store = ModeStore(POLICY, state_file=str(tmp_path / "modes.jsonl"))
    fleet = SharedModes(store, redis.url, GatewayMetrics(CollectorRegistry()), replica_id="r1", report=dict)
    await fleet.start()
    try:
        request = OverrideRequest(Target("refund_order"), Mode.OBSERVE, "ana", "INC-1")

        def change(base: ModeDocument) -> tuple[ModeDocument, list[ModeChange], ModeChange]:
            # What record_refusal does past MAX_PENDING_REFUSALS, here while the transaction is under way.
            store.record_refusal("eve", "a read-only token")
            document, entry = doc.apply(base, request, store.policy_modes, store.now())
            return document, [entry], entry

        await fleet._transact(change)
        assert store.mode_for("refund_order") is Mode.OBSERVE
        assert [entry.actor for entry in store.changes()] == ["ana", "eve"]
        reread = ModeStore(POLICY, state_file=str(tmp_path / "modes.jsonl"))  # what a restart reads back
        assert sorted(entry.actor for entry in reread.changes()) == ["ana", "eve"]
        await fleet.reread()  # the fleet's copy catches up: this replica is the newer
        other = ModeStore(POLICY)
        other_fleet = SharedModes(other, redis.url, GatewayMetrics(CollectorRegistry()), replica_id="r2", report=dict)
        await other_fleet.start()
        assert sorted(entry.actor for entry in other.changes()) == ["ana", "eve"]
        await other_fleet.close()
    finally:
        await fleet.close()


async def test_a_replica_that_audited_alone_writes_back_beside_a_change_made_meanwhile_not_over_it(
    redis: RedisProcess,
) -> None:
    """What lost a change in CI: a replica that refused changes by itself (Redis away from it) had a version past
    Redis's, and wrote its copy over the change another replica had made meanwhile."""
    stores = [ModeStore(POLICY), ModeStore(POLICY)]
    fleets = [
        SharedModes(store, redis.url, GatewayMetrics(CollectorRegistry()), replica_id=f"r{n}", report=dict)
        for n, store in enumerate(stores)
    ]
    for fleet in fleets:
        await fleet.start()
    try:
        for _ in range(3):  # what SharedModes does with a refusal while Redis is unreachable
            stores[1].record_refusal("eve", "the shared mode store (Redis) is unreachable")
        await fleets[0].set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="CHG-18")
        assert stores[1].version > stores[0].version  # the version says nothing of who holds more
        for fleet in (fleets[1], fleets[0]):
            await fleet.reread()
        raw = await fleets[0]._redis.get(KEY)
        assert raw is not None
        shared = doc.from_json(orjson.loads(raw))
        assert [entry.reason for entry in shared.audit] == ["CHG-18"] and len(shared.refused) == 3
        assert all(store.mode_for("refund_order") is Mode.OBSERVE for store in stores)
        assert stores[0].document == stores[1].document
    finally:
        for fleet in fleets:
            await fleet.close()


async def test_a_report_that_cannot_be_made_is_logged_and_the_next_is_made(
    redis: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The reports go through one task (fleet.py): a report that fails other than by Redis does not end it."""
    made: list[int] = []

    def report() -> dict[str, int]:
        made.append(len(made) + 1)
        if len(made) == 2:
            raise ValueError("a report that broke")
        return {"report": len(made)}

    fleet = SharedModes(
        ModeStore(POLICY), redis.url, GatewayMetrics(CollectorRegistry()), replica_id="r1", report=report
    )
    await fleet.start()  # the first report
    try:
        with caplog.at_level(logging.ERROR, logger="argwatch.modes"):
            await fleet.reread()  # the second, which fails: logged, and the re-read returns
        assert "reporting this replica to the fleet view failed" in caplog.text
        await fleet.reread()  # the third
        assert [entry["report"] for entry in fleet.fleet()] == [3] and fleet.connected
    finally:
        await fleet.close()


async def test_a_refusal_audited_alone_while_a_raced_transaction_was_in_flight_is_kept(redis: RedisProcess) -> None:
    """A transaction that read the audit whole and lost the race (WATCH) follows what it read before trying
    again, unless this replica audited something by itself meanwhile: that entry is kept and written back."""
    store = ModeStore(POLICY)
    fleet = SharedModes(store, redis.url, GatewayMetrics(CollectorRegistry()), replica_id="r1", report=dict)
    await fleet.start()
    try:
        await fleet.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-1")
        fleet._synced = None  # as after another replica wrote the sets whole: this replica reads them whole
        writes = fleet._writes
        calls: list[int] = []

        def raced(*args: Any) -> Any:
            if not calls:
                raw = ask(redis.port, "GET", KEY)
                assert isinstance(raw, bytes)
                ask(redis.port, "SET", KEY, raw.decode())  # another replica's write: this EXEC fails
                store.record_refusal("eve", "audited here alone while EXEC was in flight")
            calls.append(1)
            return writes(*args)

        fleet._writes = raced  # type: ignore[method-assign,assignment]
        await fleet.set_mode("refund_order", Mode.REJECT, actor="ana", reason="INC-2")
        assert len(calls) >= 2
        assert [entry.actor for entry in store.document.refused] == ["eve"]
        await fleet.reread()
        members = ask(redis.port, "ZRANGE", KEY + ":refused", "0", "-1")
        assert isinstance(members, list) and [orjson.loads(m)["actor"] for m in members] == ["eve"]  # type: ignore[arg-type]
    finally:
        await fleet.close()
