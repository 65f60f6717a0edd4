"""An owning service cannot stall or bloat the gateway through retired values, parts or churn.

The attacks (an owner is less trusted than the policy: buggy, or compromised):
- a snapshot of 3 members and 3 million retired values blocked Validate for
  10-15 s, took RSS from 87 to 886 MiB and read as fresh; retired values had
  no count or length limit (four 50 MB strings were accepted);
- a snapshot declared in 1e9 parts of 100k members grew RSS without refusal,
  the set reading as fresh meanwhile;
- churn, one member added and one removed per delta, kept every removed
  member retired for ever, and each delta cost more than the one before.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2, sources_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import admin_status, eventually, gateway_stub, request
from tests.service.scripted_source import ScriptedSource, serve

POLICY = """
sources:
  owner: {{grpc: {{target: "{target}", timeout: 1s}}}}
value_sets:
  s.handles: {{source: owner, ttl: 5m, max_members: 100000, retired_keep: {{count: 100, age: 1h}}}}
tools:
  pick:
    mode: reject
    arguments:
      handle: {{value_set: s.handles}}
"""


def handles(version: int, *members: str, **fields: Any) -> sources_pb2.ValueSet:
    return sources_pb2.ValueSet(name="s.handles", version=version, members=members, **fields)


@pytest.fixture
async def owned(tmp_path: Path) -> AsyncIterator[tuple[ScriptedSource, RunningGateway]]:
    source = ScriptedSource({"s.handles": handles(1, "ana", "bo", "cy")})
    server, target = await serve(source)
    gateway = await gateway_on(tmp_path, POLICY.format(target=target), reconnect_cap_seconds=0.3)
    try:
        yield source, gateway
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def _status(gateway: RunningGateway) -> admin_pb2.ValueSetStatus:
    (found,) = [s for s in (await admin_status(gateway)).value_sets if s.name == "s.handles"]
    assert isinstance(found, admin_pb2.ValueSetStatus)
    return found


async def _until_refused(gateway: RunningGateway, words: str) -> admin_pb2.ValueSetStatus:
    """The set's status once its last refusal names `words` (within 20 s)."""
    await eventually(lambda: _refusal_names(gateway, words), seconds=20)
    return await _status(gateway)


async def _refusal_names(gateway: RunningGateway, words: str) -> bool:
    return words in (await _status(gateway)).last_error


async def _last_refused(gateway: RunningGateway, reason: str) -> bool:
    return (await _status(gateway)).last_refused_reason == reason


def _version(gateway: RunningGateway) -> int:
    reading = gateway.provider.read("s.handles")
    return reading.snapshot.version if reading is not None else 0


async def _still_checked(gateway: RunningGateway) -> None:
    """The last good copy still checks, and Validate answers."""
    channel, stub = gateway_stub(gateway)
    async with channel:
        good = await stub.Validate(request("pick", {"handle": "ana"}), timeout=5)
        bad = await stub.Validate(request("pick", {"handle": "zed"}), timeout=5)
    assert good.decision == pb.DECISION_ALLOW and bad.decision == pb.DECISION_REJECT


async def test_retired_values_past_the_limit_or_too_long_are_refused_and_named(owned: Any) -> None:
    source, gateway = owned
    source.send_snapshot(handles(2, "ana", "bo", "cy", retired=[f"gone_{n}" for n in range(300_000)]))
    refused = await _until_refused(gateway, "too_many_retired")
    assert refused.stale_cause == admin_pb2.STALE_CAUSE_TOO_LARGE and refused.version == 1
    await _still_checked(gateway)

    source.send_snapshot(handles(3, "ana", "bo", "cy", retired=["x" * 2_000_000]))
    assert (await _until_refused(gateway, "value_too_long")).version == 1
    long_replacement = sources_pb2.RetiredValue(value="old", replaced_by="y" * 2_000_000)
    source.send_snapshot(handles(4, "ana", "bo", "cy", retired_values=[long_replacement]))
    refused = await _until_refused(gateway, "version 4 was refused (value_too_long")
    assert refused.stale_cause == admin_pb2.STALE_CAUSE_UPDATE_REFUSED and refused.version == 1
    await _still_checked(gateway)


async def test_retired_history_is_cut_to_retired_keep_by_count_and_by_age(owned: Any) -> None:
    """50,000 retired values (within max_members) are taken, and 100 kept: the last listed, none over an hour."""
    source, gateway = owned
    now = time.time()
    old, recent = Timestamp(), Timestamp()
    old.FromSeconds(int(now - 7200))
    recent.FromSeconds(int(now - 600))
    dated = [
        sources_pb2.RetiredValue(value="too_old", retired_at=old),
        sources_pb2.RetiredValue(value="recent", retired_at=recent, replaced_by="ana"),
    ]
    source.send_snapshot(
        handles(2, "ana", "bo", "cy", retired=[f"gone_{n}" for n in range(50_000)], retired_values=dated)
    )
    await eventually(lambda: _version(gateway) == 2, seconds=20)
    reading = gateway.provider.read("s.handles")
    assert reading is not None
    retired = reading.snapshot.retirements
    assert len(retired) == 100 and "too_old" not in retired and retired["recent"].replaced_by == "ana"
    assert list(retired)[-2:] == ["gone_49999", "recent"]  # the newest kept, in the order listed


async def test_a_snapshot_in_endless_parts_is_refused_once_its_parts_pass_the_limit(owned: Any) -> None:
    source, gateway = owned
    for part in range(5):  # declared: a billion parts of 40,000 members; the limit is 100,000
        members = [f"p{part}_{n}" for n in range(40_000)]
        source.send_snapshot(handles(2, *members, part=part, parts=1_000_000_000))
    refused = await _until_refused(gateway, "parts_oversized")
    assert refused.stale_cause == admin_pb2.STALE_CAUSE_TOO_LARGE and refused.version == 1
    await _still_checked(gateway)


async def test_churn_keeps_the_history_at_retired_keep_whatever_the_number_of_deltas(owned: Any) -> None:
    """2,000 deltas, each adding one member and removing one: the history stays at the newest 100."""
    source, gateway = owned
    previous = "cy"
    for version in range(2, 2002):
        joined = f"h{version}"
        source.send_delta("s.handles", version - 1, version, added=[joined], removed=[previous])
        previous = joined
    await eventually(lambda: _version(gateway) == 2001, seconds=30)
    reading = gateway.provider.read("s.handles")
    assert reading is not None
    history = list(reading.snapshot.retirements)
    assert len(history) == 100 and history[-1] == "h2000" and "cy" not in history
    assert len(reading.snapshot.retired) == 100 and len(reading.snapshot.loose_retired) == 100


async def test_parts_after_the_first_that_carry_retired_values_or_nothing_are_refused(owned: Any) -> None:
    """The bound is on what parts hold, not only on their members: empty parts that each carry megabytes of
    retired values (every part's message is kept while the snapshot gathers) are refused at the first."""
    source, gateway = owned
    source.send_snapshot(handles(2, "ana", part=0, parts=1000))
    source.send_snapshot(handles(2, part=1, parts=1000, retired=[f"x{n}" for n in range(100_000)]))
    refused = await _until_refused(gateway, "parts_oversized")
    assert refused.stale_cause == admin_pb2.STALE_CAUSE_TOO_LARGE and refused.version == 1


async def test_a_delta_of_more_values_than_one_delta_may_carry_is_refused_unread_and_the_set_fetched(
    owned: Any,
) -> None:
    """A delta is converted and judged in one pass on the event loop: past 100,000 values it is refused before
    anything is converted, and the set is fetched whole instead."""
    source, gateway = owned
    fetched = source.fetches
    source.send_delta("s.handles", 1, 2, added=[f"n{n}" for n in range(100_001)])
    # The refusal's reason, which stays on record: its cause is over as soon as the resync confirms the set,
    # which may be before the first look.
    await eventually(lambda: _last_refused(gateway, "oversized_delta"), seconds=20)
    await eventually(lambda: source.fetches > fetched, seconds=20)  # the resync
    await _still_checked(gateway)


def test_the_age_rule_drops_every_expired_value_not_only_those_in_front() -> None:
    """A value with no date (or an out-of-order date) in front of expired ones does not keep them."""
    from argwatch.server.sets.payload import Retirement
    from argwatch.server.sets.retired import RetiredHistory, RetiredKeep

    history = RetiredHistory(
        [("plain", Retirement(None, "")), ("expired", Retirement(0.0, "")), ("recent", Retirement(10_000.0, ""))]
    )
    assert list(history.keep_to(RetiredKeep(100, 3600.0, now=10_800.0))) == ["plain", "recent"]
    assert set(history.loose) == {"plain", "recent"}
