"""Redis that fails over: two gateways on a primary, its replica and three sentinels (real processes on loopback).
The primary is killed in the middle of a stream of mode changes; Sentinel promotes the replica; the gateways
follow it, Validate answers throughout, and no change whose answer claimed durability is lost."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace

import grpc
import orjson
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.modes import fleet as fleet_module
from argwatch.server.modes.fleet import KEY
from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.redis_server import SentinelGroup, ask, start_sentinel_group
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request


@pytest.fixture
def group(tmp_path) -> Iterator[SentinelGroup]:
    started = start_sentinel_group(str(tmp_path / "redis"), down_after_ms=500, failover_timeout_ms=2000)
    yield started
    started.stop()


@pytest.fixture
async def fleet(tmp_path, source: SourceServer, group: SentinelGroup) -> AsyncIterator[list[RunningGateway]]:
    started: list[RunningGateway] = []
    try:
        for name in ("replica-a", "replica-b"):
            policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
            settings = replace(loopback_settings(policy.path), redis=group.url, replica_id=name)
            started.append(await build_gateway(settings, policy=policy, registry=CollectorRegistry()))
        yield started
    finally:
        for gateway in started:
            await gateway.stop(0)


@dataclass
class Changes:
    """Every mode change asked for, by what its answer said."""

    durable: list[str] = field(default_factory=list)  # answered, with no durability warning
    warned: list[str] = field(default_factory=list)  # answered, with a warning that a failover may undo it
    failed: list[str] = field(default_factory=list)  # refused, or not confirmed
    warnings: list[str] = field(default_factory=list)


async def change_modes(fleet: list[RunningGateway], changes: Changes, stop: asyncio.Event) -> None:
    """Flips refund_order through each gateway in turn, one change after another, until `stop`."""
    channels = [admin_stub(gateway) for gateway in fleet]
    try:
        number = 0
        while not stop.is_set():
            _, admin = channels[number % len(channels)]
            reason = f"CHG-{number}"
            mode = (pb.MODE_OBSERVE, pb.MODE_REJECT)[number % 2]
            try:
                answer: admin_pb2.SetModeResponse = await admin.SetMode(
                    admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=reason),
                    metadata=(("x-argwatch-actor", "ana@oncall"),),
                    timeout=5,
                )
            except grpc.aio.AioRpcError:
                changes.failed.append(reason)
                with contextlib.suppress(TimeoutError):  # the store is away: on-call tries again shortly
                    await asyncio.wait_for(stop.wait(), 0.05)
            else:
                if answer.durability_warning:
                    changes.warned.append(reason)
                    changes.warnings.append(answer.durability_warning)
                else:
                    changes.durable.append(reason)
            number += 1
    finally:
        for channel, _ in channels:
            await channel.close()


async def validate_throughout(fleet: list[RunningGateway], answered: list[int], stop: asyncio.Event) -> None:
    """Validate on every gateway, without pause, until `stop`; any error fails the test."""
    channels = [gateway_stub(gateway) for gateway in fleet]
    try:
        while not stop.is_set():
            for index, (_, stub) in enumerate(channels):
                verdict = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=2)
                assert verdict.decision in (pb.DECISION_ALLOW, pb.DECISION_REJECT)
                answered[index] += 1
            with contextlib.suppress(TimeoutError):  # a pause between rounds, ended early by `stop`
                await asyncio.wait_for(stop.wait(), 0.01)
    finally:
        for channel, _ in channels:
            await channel.close()


def audited_in_redis(port: int) -> list[str]:
    """The reasons in the fleet's audit as the Redis on `port` holds it."""
    raw = ask(port, "GET", KEY)
    assert isinstance(raw, bytes)
    return [entry["reason"] for entry in orjson.loads(raw)["audit"]]


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

    async def the_fleet_agrees() -> bool:
        audits = [
            {change.reason for change in gateway.modes.changes(limit=1000) if change.reason.startswith("CHG-")}
            for gateway in fleet
        ]
        return (
            must_keep <= audits[0]
            and all(audit == audits[0] for audit in audits)
            and len({gateway.modes.version for gateway in fleet}) == 1
        )

    await eventually(the_fleet_agrees, seconds=10)
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
