"""A fleet mode change committed after EXEC keeps what this replica audited by itself meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument, OverrideRequest, Target
from argwatch.server.modes.fleet import SharedModes
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode
from argwatch.server.telemetry.metrics import GatewayMetrics
from tests.redis_server import RedisProcess, start_redis

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
