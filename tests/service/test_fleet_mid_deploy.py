"""Issue 18.3: a fleet mid-deploy (replicas on two policies, one Redis) keeps every override and audit entry.

Before, an override of `new_tool` set through a replica on the new policy was
dropped by a replica on the old one at its next write ("dropping the saved
override of 'new_tool'"), with no audit entry, while the audit still said
"applied". Now a replica keeps an override of a tool it does not know as it
is, shows it, and audits nothing it did not do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import admin_stub, eventually, gateway_stub, request

OLD = """
sources:
  local: {file: sets.yaml}
value_sets:
  codes: {source: local}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: codes}
"""
NEW = (
    OLD
    + """
  new_tool:
    mode: observe
    arguments:
      code: {value_set: codes}
"""
)


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    redis: RedisProcess = start_redis(str(tmp_path))
    started = []
    try:
        for name, text in (("old", OLD), ("new", NEW)):
            folder = tmp_path / name
            folder.mkdir()
            (folder / "sets.yaml").write_text("codes: {version: 1, members: [A, B]}\n")
            started.append(await gateway_on(folder, text, redis=redis.url, replica_id=f"replica-{name}"))
        yield started[0], started[1]
    finally:
        for gateway in started:
            await gateway.stop(0)
        redis.kill()


async def set_mode(gateway: RunningGateway, tool: str, mode: pb.Mode, reason: str, expires: int = 0) -> None:
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(tool=tool, mode=mode, reason=reason, expires_in_seconds=expires),
            metadata=(("x-argwatch-actor", "ana@oncall"),),
            timeout=5,
        )


def audit(gateway: RunningGateway) -> list[tuple[str, str, str, str]]:
    return sorted((c.target, c.new, c.reason, c.outcome) for c in gateway.modes.changes(1000))


async def test_every_override_and_audit_entry_survives_writes_through_both_policies(
    fleet: tuple[RunningGateway, RunningGateway], caplog: pytest.LogCaptureFixture
) -> None:
    old, new = fleet
    caplog.set_level(logging.INFO, logger="argwatch.modes")
    await set_mode(new, "new_tool", pb.MODE_REJECT, "INC-1 new tool misbehaves")
    await set_mode(old, "refund_order", pb.MODE_OBSERVE, "INC-2 false rejects")  # a write through the old one
    # Concurrent writes through both replicas: each is a transaction on the whole shared state.
    await asyncio.gather(
        *(set_mode(old if i % 2 else new, "refund_order", pb.MODE_OBSERVE, f"INC-3.{i}") for i in range(10))
    )
    await set_mode(new, "new_tool", pb.MODE_REJECT, "INC-4 still misbehaving", expires=2)  # expires on new only

    wanted = {"INC-1 new tool misbehaves", "INC-2 false rejects", "INC-4 still misbehaving"}
    wanted |= {f"INC-3.{i}" for i in range(10)}

    async def agreed() -> bool:
        applied = [entry for entry in audit(new) if entry[3] == "applied"]
        return audit(old) == audit(new) and sorted(reason for _, _, reason, _ in applied) == sorted(wanted)

    await eventually(agreed, seconds=10)
    # The new replica enforces the override; the old one keeps it and shows it as another policy's tool.
    assert new.modes.mode_for("new_tool") is Mode.REJECT
    channel, stub = gateway_stub(new)
    async with channel:
        verdict = await stub.Validate(request("new_tool", {"code": "Z"}), timeout=5)
    assert verdict.decision == pb.DECISION_REJECT
    channel, admin = admin_stub(old)
    async with channel:
        status = await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    (foreign,) = status.foreign_overrides
    assert (foreign.tool, foreign.mode, foreign.actor, foreign.reason) == (
        "new_tool",
        pb.MODE_REJECT,
        "ana@oncall",
        "INC-4 still misbehaving",
    )
    assert foreign.HasField("expires_at")
    assert "new_tool" not in [t.tool for t in status.tools]

    # The override expires on the replica that knows the tool; once, audited once, the same on both.
    async def expired() -> bool:
        return new.modes.mode_for("new_tool") is Mode.OBSERVE and audit(old) == audit(new)

    await eventually(expired, seconds=10)
    expiries = [entry for entry in audit(old) if entry[3] == "expired"]
    assert len(expiries) == 1 and expiries[0][0] == "new_tool"
    every = audit(new)
    assert len(every) == 14 and all(outcome in ("applied", "expired") for *_, outcome in every)
    said = [r.getMessage() for r in caplog.records]
    assert not [line for line in said if "dropping" in line]
    assert not [line for line in said if "wrote them back" in line]  # Redis was healthy throughout


async def test_a_change_whose_reply_was_lost_leaves_every_replica_on_what_redis_holds(
    fleet: tuple[RunningGateway, RunningGateway],
) -> None:
    """Redis paused past the replica's 0.5 s timeout while a change's EXEC waits: Redis may run it or drop
    it, and the replica cannot know. Before, redis-py's report of the lost connection (a WatchError) made
    the transaction retry, applying the change again on top of a state that might hold it; and a rolled
    back change, then a local audit, left the replica at Redis's version with other content, never adopted.
    Now the caller is told it may have been made, and both replicas end on what Redis holds."""
    import grpc
    import redis.asyncio as aioredis

    old, new = fleet
    assert old.settings.redis is not None
    control = aioredis.Redis.from_url(old.settings.redis)
    try:
        await control.execute_command("CLIENT", "PAUSE", "2000", "WRITE")  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as uncertain:
            await set_mode(old, "refund_order", pb.MODE_OBSERVE, "INC-9 reply lost")
        assert "may have been made" in (uncertain.value.details() or "")
    finally:
        await control.aclose()

    async def agreed() -> bool:
        modes = {g.modes.mode_for("refund_order") for g in (old, new)}
        return len(modes) == 1 and audit(old) == audit(new)

    await eventually(agreed, seconds=10)
    made = [entry for entry in audit(new) if entry[2] == "INC-9 reply lost"]
    assert len(made) <= 1  # never applied twice
    expected = Mode.OBSERVE if made else Mode.REJECT
    assert old.modes.mode_for("refund_order") is expected and new.modes.mode_for("refund_order") is expected


async def test_a_check_override_reaches_every_replica_and_one_lacking_the_check_keeps_it_unapplied(
    fleet: tuple[RunningGateway, RunningGateway],
) -> None:
    """Issue 29: `arg:code` of new_tool exists only on the new policy: set through the old replica it is refused
    there (naming the checks it has), set through the new one it reaches the old, which keeps it, applies none of it,
    and never expires it (the new replica does)."""
    old, new = fleet
    channel, admin = admin_stub(old)
    async with channel:
        with pytest.raises(Exception, match="the policy has no tool 'new_tool'"):
            await admin.SetMode(
                admin_pb2.SetModeRequest(tool="new_tool", check="arg:code", mode=pb.MODE_REJECT, reason="INC-5"),
                timeout=5,
            )
    channel, admin = admin_stub(new)
    async with channel:
        await admin.SetMode(
            admin_pb2.SetModeRequest(
                tool="refund_order", check="arg:reason_code", mode=pb.MODE_OBSERVE, reason="INC-6 codes drifted"
            ),
            timeout=5,
        )
        await admin.SetMode(
            admin_pb2.SetModeRequest(
                tool="new_tool", check="arg:code", mode=pb.MODE_REJECT, reason="INC-7", expires_in_seconds=2
            ),
            timeout=5,
        )

    async def both_relaxed() -> bool:
        return all(g.modes.check_modes("refund_order") == {"arg:reason_code": Mode.OBSERVE} for g in (old, new))

    await eventually(both_relaxed)
    for gateway in (old, new):  # an invented code on a rejecting tool passes on both: that check is relaxed
        channel, stub = gateway_stub(gateway)
        async with channel:
            verdict = await stub.Validate(request("refund_order", {"reason_code": "Z"}), timeout=5)
        assert verdict.decision == pb.DECISION_ALLOW
    assert old.modes.check_modes("new_tool") == {}  # kept, not applied: the old policy has no such check
    assert any(target.check == "arg:code" for target in old.modes.document.overrides)

    async def expired_everywhere() -> bool:
        return all(not any(t.check == "arg:code" for t in g.modes.document.overrides) for g in (old, new))

    await eventually(expired_everywhere, seconds=15)
    assert next(c.outcome for c in new.modes.changes(1000) if c.check == "arg:code") == "expired"
