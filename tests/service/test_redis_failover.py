"""Redis that fails over: two gateways on a primary, its replica and three sentinels (real processes on loopback).
The primary is killed in the middle of a stream of mode changes; Sentinel promotes the replica; the gateways
follow it, Validate answers throughout, and no change whose answer claimed durability is lost."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator

import pytest

from argwatch.server.modes import fleet as fleet_module
from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer
from tests.redis_server import SentinelGroup, start_sentinel_group
from tests.service.fleet_traffic import Changes, change_modes, fleet_on, the_fleet_agrees, validate_throughout
from tests.service.helpers import admin_status, admin_stub, eventually, stored_audit


@pytest.fixture
def group(tmp_path) -> Iterator[SentinelGroup]:
    started = start_sentinel_group(str(tmp_path / "redis"), down_after_ms=500, failover_timeout_ms=2000)
    yield started
    started.stop()


@pytest.fixture
async def fleet(tmp_path, source: SourceServer, group: SentinelGroup) -> AsyncIterator[list[RunningGateway]]:
    async with fleet_on(str(tmp_path), source.target, group.url) as started:
        yield started


def audited_in_redis(port: int) -> list[str]:
    """The reasons in the fleet's audit as the Redis on `port` holds it."""
    return [entry["reason"] for entry in stored_audit(port)]


async def test_the_primary_killed_mid_changes_loses_no_change_answered_as_durable(
    group: SentinelGroup, fleet: list[RunningGateway]
) -> None:
    changes, answered = Changes(), [0, 0]
    stop = asyncio.Event()
    flipping = asyncio.create_task(change_modes(fleet, changes, stop))
    validating = asyncio.create_task(validate_throughout(fleet, answered, stop))
    try:
        await eventually(lambda: len(changes.durable) >= 6, seconds=15)
        group.primary.kill()  # SIGKILL, while the changes keep coming
        durable_before = len(changes.durable)

        async def promoted() -> bool:
            return group.primary_port() == group.replica.port

        await eventually(promoted, seconds=20)
        answered_in_gap, warned_before = list(answered), len(changes.warned)

        async def changes_made_on_the_new_primary() -> bool:
            return len(changes.warned) >= warned_before + 3

        await eventually(changes_made_on_the_new_primary, seconds=20)
        stop.set()
        await asyncio.gather(flipping, validating)  # raises if a Validate failed at any moment
    finally:
        stop.set()
        for task in (flipping, validating):
            task.cancel()
        await asyncio.gather(flipping, validating, return_exceptions=True)

    # Validate answered on both gateways, during the failover too.
    assert all(count > 0 for count in answered_in_gap) and answered[0] > answered_in_gap[0]
    # The new primary has no replica: its changes are answered in force, with the warning, never as durable
    # (one change may have been answered durable as the kill landed).
    assert len(changes.durable) <= durable_before + 1
    assert all("no replica of Redis confirmed its copy" in warning for warning in changes.warnings)

    # Every change answered as durable is on the new primary, and in every gateway's audit; so are the ones
    # made on the new primary since. A change answered with the warning while the primary was dying may be
    # lost (docs/deploying.md says when): then it is lost on every gateway alike.
    must_keep = set(changes.durable) | set(changes.warned[warned_before:])
    assert must_keep <= set(audited_in_redis(group.replica.port))

    await eventually(lambda: the_fleet_agrees(fleet, must_keep), seconds=10)
    statuses = [await admin_status(gateway) for gateway in fleet]
    assert all(status.mode_store_connected for status in statuses)
    assert len({gateway.modes.mode_for("refund_order") for gateway in fleet}) == 1


async def set_mode(gateway: RunningGateway, mode: pb.Mode, reason: str) -> admin_pb2.SetModeResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        answer: admin_pb2.SetModeResponse = await admin.SetMode(
            admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=reason),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )
        return answer


async def test_a_change_the_replica_has_not_copied_is_answered_applied_with_the_warning(
    group: SentinelGroup, fleet: list[RunningGateway], monkeypatch: pytest.MonkeyPatch
) -> None:
    """WAIT counts the replicas that have what the connection that wrote the change wrote: with the replica
    stopped (alive to the primary, copying nothing), no change is answered durable; with WAIT itself failing
    after EXEC (its reply later than the read deadline), the change is still answered as made, since it is."""
    gateway = fleet[0]
    assert not (await set_mode(gateway, pb.MODE_OBSERVE, "INC-1")).durability_warning  # the replica copies it
    group.replica.process.send_signal(signal.SIGSTOP)
    try:
        answer = await set_mode(gateway, pb.MODE_REJECT, "INC-2")
        assert "none answered within" in answer.durability_warning
        monkeypatch.setattr(fleet_module, "REPLICA_WAIT_SECONDS", 2 * fleet_module.TIMEOUT_SECONDS)
        answer = await set_mode(gateway, pb.MODE_OBSERVE, "INC-3")
        assert "asking for it failed" in answer.durability_warning
        assert audited_in_redis(group.primary.port)[-2:] == ["INC-2", "INC-3"]
        assert gateway.modes.mode_for("refund_order") is Mode.OBSERVE
    finally:
        group.replica.process.send_signal(signal.SIGCONT)
    monkeypatch.undo()

    async def copied_again() -> bool:
        return not (await set_mode(gateway, pb.MODE_REJECT, "INC-4")).durability_warning

    await eventually(copied_again, seconds=10)
