"""Issue 17.4: a caller with no token changes nothing durable, and cannot stall the gateway or empty the audit.

Before, each refused SetMode was written to the audit, and with --mode-state each
write rewrote and fsynced the whole file on the event loop: 10,145 unauthenticated
calls left 10,000 "unknown caller" entries and none of the real changes, Validate's
p50 went from 0.9 ms to 160 ms, and a real SetMode sent after the flood timed out.
With Redis the fleet audit was wiped in 20 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import admin_stub, gateway_stub, value
from tests.service.helpers import request as call

ADMIN = "admin-token-0123456789"
POLICY = """
tools:
  refund_order:
    mode: observe
    schema: {type: object, properties: {n: {type: integer}}}
"""
FLOOD = 5_000


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


@pytest.mark.parametrize("store", ["file", "redis"])
async def test_a_flood_of_unauthenticated_set_modes_writes_nothing_and_stalls_nothing(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n")
    tokens.chmod(0o600)
    state = tmp_path / "modes.jsonl"
    extra: dict[str, Any] = {"admin_tokens": str(tokens), "mode_state": str(state)}
    if store == "redis":
        extra["redis"] = request.getfixturevalue("redis").url
    gateway = await gateway_on(tmp_path, POLICY, **extra)
    admin_channel, admin = admin_stub(gateway)
    channel, stub = gateway_stub(gateway)
    bearer = (("authorization", f"Bearer {ADMIN}"),)

    async def set_mode(mode: pb.Mode, reason: str) -> None:
        change = admin_pb2.SetModeRequest(tool="refund_order", mode=mode, reason=reason)
        await admin.SetMode(change, metadata=bearer, timeout=5)

    async def refused_calls(count: int) -> None:
        for _ in range(count):
            with pytest.raises(grpc.aio.AioRpcError):
                await admin.SetMode(admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE), timeout=5)

    slowest: list[float] = []

    async def validating(stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            await stub.Validate(call("refund_order", {"n": "x"}), timeout=2)  # raises past the deadline
            slowest.append(time.monotonic() - started)

    try:
        await set_mode(pb.MODE_REJECT, "INC-1: before the flood")
        stop = asyncio.Event()
        checker = asyncio.create_task(validating(stop))
        flood = [asyncio.create_task(refused_calls(FLOOD // 50)) for _ in range(50)]
        await asyncio.sleep(0)
        await set_mode(pb.MODE_OBSERVE, "INC-1: during the flood")  # applied, flood or not
        await asyncio.gather(*flood)
        stop.set()
        await checker
        trail = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(limit=1000), metadata=bearer, timeout=5)
        assert [(c.actor, c.reason, c.outcome) for c in reversed(trail.changes)] == [
            ("ana@oncall", "INC-1: before the flood", "applied"),
            ("ana@oncall", "INC-1: during the flood", "applied"),
        ]
        refused = value(gateway.registry, "argwatch_admin_refused_total", method="SetMode", reason="unauthenticated")
        assert refused == FLOOD
        assert slowest and max(slowest) < 2.0
        verdict = await stub.Validate(call("refund_order", {"n": "x"}), timeout=5)
        assert verdict.mode == pb.MODE_OBSERVE  # the change made during the flood is in force
    finally:
        await admin_channel.close()
        await channel.close()
        await gateway.stop(0)
    journal = state.read_text()
    assert journal.count("\n") == 2 and "during the flood" in journal and "unauthenticated" not in journal
    restarted = await gateway_on(tmp_path, POLICY, **extra)
    try:
        kept = [(c.reason, c.outcome) for c in reversed(restarted.modes.changes(1000))]
        assert kept == [("INC-1: before the flood", "applied"), ("INC-1: during the flood", "applied")]
    finally:
        await restarted.stop(0)


def test_refused_attempts_never_push_a_change_out_of_the_trail(tmp_path: Path) -> None:
    from argwatch.server.modes.store import REFUSED_KEEP, ModeRefused, ModeStore
    from argwatch.server.policy.loader import parse_policy

    policy = parse_policy(POLICY.encode(), str(tmp_path / "policy.yaml"))
    store = ModeStore(policy, state_file=str(tmp_path / "modes.jsonl"))
    store.set_mode("refund_order", None, actor="ana", reason="keep me")
    for _ in range(REFUSED_KEEP * 3):  # an authenticated read-only token, say, trying again and again
        store.record_refusal("grafana", "permission_denied")
        with pytest.raises(ModeRefused):
            store.set_mode("no_such_tool", None, actor="grafana", reason="x")
    assert [c.reason for c in store.changes(100_000) if not c.outcome.startswith("refused")] == ["keep me"]
    assert len(store.changes(100_000)) == 1 + REFUSED_KEEP
    reread = ModeStore(policy, state_file=str(tmp_path / "modes.jsonl"))
    assert [c.reason for c in reread.changes(100_000) if not c.outcome.startswith("refused")] == ["keep me"]
    assert dataclasses.is_dataclass(reread.changes(1)[0])
