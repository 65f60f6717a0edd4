"""Traffic for failover tests: mode changes through every gateway in turn, each recorded by what its answer
said, and Validate on every gateway without pause; both run until told to stop. And the fleet they run on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import grpc
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import loopback_settings, make_policy
from tests.service.helpers import admin_stub, gateway_stub, request


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


@contextlib.asynccontextmanager
async def fleet_on(folder: str, source_target: str, redis_url: str) -> AsyncIterator[list[RunningGateway]]:
    """Two gateways (replica-a, replica-b) sharing the Redis at `redis_url`, refund_order in reject mode."""
    started: list[RunningGateway] = []
    try:
        for name in ("replica-a", "replica-b"):
            policy = make_policy(folder, source_target, refund_mode="reject")
            settings = replace(loopback_settings(policy.path), redis=redis_url, replica_id=name)
            started.append(await build_gateway(settings, policy=policy, registry=CollectorRegistry()))
        yield started
    finally:
        for gateway in started:
            await gateway.stop(0)


def the_fleet_agrees(fleet: list[RunningGateway], must_keep: set[str]) -> bool:
    """Every gateway holds the same mode changes (the test's, CHG-n) at the same version, `must_keep` among them."""
    audits = [
        {change.reason for change in gateway.modes.changes(limit=1000) if change.reason.startswith("CHG-")}
        for gateway in fleet
    ]
    return (
        must_keep <= audits[0]
        and all(audit == audits[0] for audit in audits)
        and len({gateway.modes.version for gateway in fleet}) == 1
    )
