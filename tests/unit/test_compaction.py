"""A large set's background compaction against what can happen meanwhile: deltas, a whole copy, a rebuild past the
hard bound, a replay past it, a reader holding the replaced copy. Each time the set held is the owner's."""

from __future__ import annotations

import asyncio
import time
from types import MappingProxyType

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.sets.overlay import COMPACT_MIN, HARD_FACTOR, OverlaySet, compaction_due
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate, SetPayload
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets import set_table as set_table_module
from argwatch.server.valuesets.set_state import SetState
from argwatch.server.valuesets.set_table import SetTable
from argwatch.server.valuesets.set_updates import SetUpdates
from tests.service.helpers import eventually

NAME = "b.ids"
POLICY = b"""
sources: {b: {grpc: {target: "127.0.0.1:1", timeout: 5s}}}
value_sets: {b.ids: {source: b, ttl: 1h, max_members: 400000}}
tools: {pay: {arguments: {invoice: {value_set: b.ids}}}}
"""
SIZE = PACK_ABOVE + 4000


class Owner:
    """The owner's side, kept as a plain set: what the gateway must end up holding."""

    def __init__(self) -> None:
        self.members = {f"inv_{i:06d}" for i in range(SIZE)}
        self.version = 1

    def delta(self, added: list[str] | tuple[str, ...] = (), removed: list[str] | tuple[str, ...] = ()) -> DeltaUpdate:
        made = DeltaUpdate(
            NAME, self.version, self.version + 1, tuple(added), tuple(removed), MappingProxyType({}), "i"
        )
        self.members = (self.members - set(removed)) | set(added)
        self.version += 1
        return made

    def whole(self) -> SetPayload:
        self.version += 1
        self.members = {m for m in self.members if not m.endswith("7")} | {f"whole_{self.version}"}
        return SetPayload(NAME, self.version, sorted(self.members), incarnation="i")


@pytest.fixture
async def table(tmp_path) -> tuple[SetTable, SetUpdates, SetState, Owner]:  # type: ignore[misc]
    policy = parse_policy(POLICY, str(tmp_path / "policy.yaml"))
    made = SetTable(
        policy, GatewayMetrics(CollectorRegistry()), EventLog(), clock=time.time, monotonic=time.monotonic,
        snapshot_dir=None,
    )  # fmt: skip
    updates = SetUpdates(made, lambda state, reason: None, time.time)
    owner = Owner()
    state = made.states[NAME]
    await made.install(state, SetPayload(NAME, 1, sorted(owner.members), incarnation="i"))
    yield made, updates, state, owner
    await made.close()


def running(name: str) -> bool:
    """Whether a task running SetTable's coroutine `name` is not done yet."""
    return any(
        getattr(task.get_coro(), "__qualname__", "") == f"SetTable.{name}" and not task.done()
        for task in asyncio.all_tasks()
    )


async def settled(state: SetState) -> None:
    """Until no compaction runs: none for the set, and none still finishing (one a whole copy dropped)."""
    await eventually(lambda: state.replay is None and not running("_compact"), seconds=20)


def holds_the_owners(state: SetState, owner: Owner) -> bool:
    held = state.snapshot
    assert held is not None
    return held.version == owner.version and set(held.members) == owner.members and held.size == len(owner.members)


async def start_compaction(updates: SetUpdates, state: SetState, owner: Owner) -> None:
    await updates.take_update("b", owner.delta(added=[f"new_{i}" for i in range(COMPACT_MIN + 1)]), {NAME: state})
    assert state.snapshot is not None and compaction_due(state.snapshot) and state.replay is not None


async def test_deltas_during_a_compaction_are_replayed_over_the_new_base(table) -> None:
    _, updates, state, owner = table
    first_base = state.snapshot.members
    await start_compaction(updates, state, owner)
    for i in range(30):
        await updates.take_update("b", owner.delta(added=[f"during_{i}"], removed=[f"inv_{i:06d}"]), {NAME: state})
    await settled(state)
    members = state.snapshot.members
    assert (members.base if isinstance(members, OverlaySet) else members) is not first_base
    assert holds_the_owners(state, owner)


async def test_a_whole_copy_during_a_compaction_wins_and_the_compaction_is_dropped(table) -> None:
    _, updates, state, owner = table
    await start_compaction(updates, state, owner)
    await updates.take_update("b", owner.delta(added=["a1"], removed=["inv_000001"]), {NAME: state})
    await updates.take_whole(state, owner.whole())
    await updates.take_update("b", owner.delta(added=["last"]), {NAME: state})
    await settled(state)
    assert holds_the_owners(state, owner)


async def test_layers_past_the_hard_bound_during_a_compaction_rebuild_in_full(table) -> None:
    _, updates, state, owner = table
    await start_compaction(updates, state, owner)
    big = [f"big_{i}" for i in range(HARD_FACTOR * COMPACT_MIN)]
    await updates.take_update("b", owner.delta(added=big), {NAME: state})
    await updates.take_update("b", owner.delta(removed=["big_1", "inv_000009"]), {NAME: state})
    await settled(state)
    assert holds_the_owners(state, owner)


async def test_a_replay_that_passes_the_hard_bound_gives_up_and_the_next_delta_still_lands(table) -> None:
    _, updates, state, owner = table
    await start_compaction(updates, state, owner)
    for i in range(12):
        await updates.take_update("b", owner.delta(added=[f"r{i}_{j}" for j in range(1300)]), {NAME: state})
    await settled(state)
    for i in range(3):
        await updates.take_update("b", owner.delta(added=[f"z{i}"]), {NAME: state})
    await settled(state)
    assert holds_the_owners(state, owner)


async def test_a_reader_of_the_replaced_copy_keeps_every_member(table, monkeypatch) -> None:
    made, updates, state, owner = table
    monkeypatch.setattr(set_table_module, "RELEASE_AFTER_SECONDS", 0.05)
    await start_compaction(updates, state, owner)
    reading = made.read(NAME)  # a call that read the set, now waiting on a record look-up
    assert reading is not None
    before = set(reading.snapshot.members)
    await settled(state)
    await asyncio.sleep(0.1)  # past RELEASE_AFTER_SECONDS: free memory handed back, the reader's copy kept
    assert set(reading.snapshot.members) == before and "inv_000005" in reading.snapshot.members
    assert reading.snapshot.loose_index.get("inv-000005") == "inv_000005"


async def test_a_replaced_large_copy_is_let_go_off_the_loop(table) -> None:
    """Its packed buffers are handed back by a worker thread (set_table._replace), not by the loop's."""
    import threading
    import weakref

    _, updates, state, owner = table
    freed_on: list[str] = []
    weakref.finalize(state.snapshot.members, lambda: freed_on.append(threading.current_thread().name))
    await updates.take_update("b", owner.delta(added=["one"]), {NAME: state})  # layered: the base stays
    await asyncio.sleep(0.05)
    assert freed_on == []
    await updates.take_whole(state, owner.whole())
    await eventually(lambda: bool(freed_on), seconds=10)
    assert freed_on != [threading.current_thread().name]
    assert holds_the_owners(state, owner)


async def test_a_compaction_lets_go_of_the_replaced_base_off_the_loop(table) -> None:
    import threading
    import weakref

    _, updates, state, owner = table
    freed_on: list[str] = []
    weakref.finalize(state.snapshot.members, lambda: freed_on.append(threading.current_thread().name))
    await start_compaction(updates, state, owner)
    await settled(state)
    await eventually(lambda: bool(freed_on), seconds=10)
    assert freed_on != [threading.current_thread().name]
    assert holds_the_owners(state, owner)
