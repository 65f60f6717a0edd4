"""The fleet's state as a head and lists (format 2): a replica follows the head's new entries to exactly the state
the lists hold, and falls back to the lists whenever the head cannot say."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

import orjson
import pytest

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument, Override, Target
from argwatch.server.modes.shared_head import (
    RECENT_KEEP,
    Head,
    StateReader,
    Synced,
    appended,
    entries_from_sets,
    entry_json,
    followed,
    head_json,
    new_since,
    passed,
    rewritten,
    with_sets,
)
from argwatch.server.policy.model import Mode
from tests.unit.test_shared_reader import change

KEEP = (1000, 100)


class Fleet:
    """What Redis holds in format 2 (the head, and the two sorted sets cut to the newest by time, as fleet.py's
    ZADD and ZREMRANGEBYRANK keep them), changed the way fleet.py changes it."""

    def __init__(self, document: ModeDocument) -> None:
        self.head, changes, refusals = rewritten(document, KEEP)
        self.sets: list[list[tuple[float, bytes]]] = [[], []]
        self.add(changes + refusals)

    def add(self, entries: list[ModeChange]) -> None:
        for entry in entries:
            part = 1 if entry.refused else 0
            self.sets[part] = sorted([*self.sets[part], (entry.at, entry_json(entry))])[-KEEP[part] :]

    def append(self, entries: list[ModeChange], document: ModeDocument) -> None:
        self.head = appended(self.head, entries, document)
        self.add(entries)

    def whole(self) -> ModeDocument:
        changes, refusals = ([member for _, member in part] for part in self.sets)
        return with_sets(self.head, entries_from_sets(changes, refusals))


def overrides(mode: Mode) -> MappingProxyType[Target, Override]:
    return MappingProxyType({Target("tool_1"): Override(mode, "ana", "INC-1", 1_800_000_000.0, None)})


def test_a_replica_following_heads_holds_what_the_lists_hold_after_every_change() -> None:
    """Seeded: 400 changes and refusals, some stamped before the newest (another replica's clock behind),
    followed by a replica reading the head now and then (at most RECENT_KEEP entries behind)."""
    rng = random.Random(31)
    start = ModeDocument(5, overrides(Mode.OBSERVE), tuple(change(n) for n in range(50)), ())
    fleet = Fleet(start)
    synced = Synced(start, fleet.head)
    state = start
    for number in range(50, 450):
        entry = replace(change(number, refused=rng.random() < 0.3), at=1_800_000_000.0 + number - rng.random() * 3)
        state = replace(doc.record(state, entry), overrides=overrides(rng.choice(list(Mode))))
        fleet.append([entry], state)
        if rng.random() < 0.2 or number == 449:
            new = new_since(synced, fleet.head)
            assert new is not None
            document = followed(synced, fleet.head, new, KEEP)
            whole = fleet.whole()
            assert document.version == whole.version and dict(document.overrides) == dict(whole.overrides)
            assert document.audit == whole.audit and document.refused == whole.refused
            synced = Synced(document, fleet.head)


def test_a_replica_further_behind_than_the_head_holds_reads_the_lists() -> None:
    start = ModeDocument(1, overrides(Mode.OBSERVE), (change(0),), ())
    fleet = Fleet(start)
    synced = Synced(start, fleet.head)
    state = start
    for number in range(1, RECENT_KEEP + 2):
        state = doc.record(state, change(number))
        fleet.append([change(number)], state)
    assert new_since(synced, fleet.head) is None


def test_another_epoch_or_an_overlap_that_differs_is_not_followed() -> None:
    start = ModeDocument(3, overrides(Mode.OBSERVE), (change(0), change(1), change(2)), ())
    fleet = Fleet(start)
    synced = Synced(start, fleet.head)
    assert new_since(synced, fleet.head) == []
    assert new_since(synced, replace(fleet.head, epoch="another")) is None
    # Redis lost the newest entry in a failover and the new primary took another at the same count.
    lost = replace(fleet.head, recent=((change(0), change(1), change(7)), ()))
    assert new_since(synced, lost) is None
    # Counts behind what the replica held: Redis lost writes.
    assert new_since(synced, replace(fleet.head, counts=(2, 0))) is None


def test_nothing_new_follows_to_the_same_document() -> None:
    start = ModeDocument(3, overrides(Mode.OBSERVE), (change(0),), ())
    fleet = Fleet(start)
    synced = Synced(start, fleet.head)
    assert followed(synced, fleet.head, [], KEEP) is start


def test_a_head_reads_back_as_written_and_reuses_its_entries() -> None:
    reader = StateReader(1100)
    state = ModeDocument(9, overrides(Mode.REJECT), tuple(change(n) for n in range(40)), (change(40, refused=True),))
    fleet = Fleet(state)
    first = reader.read(head_json(fleet.head))
    assert isinstance(first, Head)
    assert first == fleet.head
    state = doc.record(state, change(41))
    fleet.append([change(41)], state)
    again = reader.read(head_json(fleet.head))
    assert again == fleet.head
    assert isinstance(again, Head) and again.recent[0][0] is first.recent[0][1]  # built once, reused
    reader.wrote(b"x", fleet.head)
    assert reader.read(b"x") is fleet.head


def test_a_head_read_by_a_release_before_format_2_is_a_document_of_its_newest_entries() -> None:
    state = ModeDocument(9, overrides(Mode.REJECT), tuple(change(n) for n in range(40)), ())
    head = Fleet(state).head
    read = StateReader(1100, heads=False).read(head_json(head))
    assert isinstance(read, ModeDocument)
    assert read.version == 9 and read.audit == state.audit[-RECENT_KEEP:]


@pytest.mark.parametrize(
    "log",
    [
        "not an object",
        {"format": 3, "epoch": "e", "counts": [0, 0]},
        {"format": 2, "epoch": "e", "counts": [0]},
        {"format": 2, "epoch": "e", "counts": [-1, 0]},
        {"format": 2, "epoch": "e", "counts": [True, 0]},
        {"format": 2, "epoch": "e" * 65, "counts": [0, 0]},
        {"format": 2, "epoch": "e", "counts": [0, 0], "more": 1},
    ],
)
def test_a_head_argwatch_did_not_write_is_refused(log: object) -> None:
    data = orjson.loads(head_json(Fleet(ModeDocument(1, overrides(Mode.REJECT), (change(0),), ())).head))
    data["log"] = log
    with pytest.raises((TypeError, ValueError)):
        StateReader(1100).read(orjson.dumps(data))


def test_a_head_holding_more_than_it_keeps_is_refused() -> None:
    data = orjson.loads(head_json(Fleet(ModeDocument(1, overrides(Mode.REJECT), (change(0),), ())).head))
    data["audit"] = [doc.change_to_json(change(n)) for n in range(RECENT_KEEP + 1)]
    with pytest.raises(ValueError, match="more entries than a head holds"):
        StateReader(1100).read(orjson.dumps(data))


def test_a_head_before_the_one_followed_is_passed_and_one_of_a_redis_that_lost_writes_is_not() -> None:
    start = ModeDocument(1, overrides(Mode.OBSERVE), (change(0),), ())
    fleet = Fleet(start)
    heads = [fleet.head]
    state = start
    for number in range(1, 40):
        state = doc.record(state, change(number))
        fleet.append([change(number)], state)
        heads.append(fleet.head)
    synced = Synced(state, fleet.head)
    assert all(passed(synced, head) for head in heads[-8:])  # announcements arriving late
    assert not passed(synced, heads[0])  # further back than the head held: cannot tell, so read
    lost = Fleet(start)
    lost.head = replace(heads[30], epoch=fleet.head.epoch)
    state = doc.record(doc.record(start, change(1)), change(77))  # a new primary that lost writes
    lost.append([change(77)], state)
    assert not passed(synced, lost.head)
    assert not passed(synced, replace(heads[-1], epoch="another"))


def test_a_head_a_whole_head_ahead_is_not_followed_since_nothing_overlaps() -> None:
    """Exactly RECENT_KEEP entries ahead, no entry of the head is one the replica held: a continuation and a
    Redis that lost the newest writes and took as many new ones look alike, so the sets are read."""
    start = ModeDocument(1, overrides(Mode.OBSERVE), tuple(change(n) for n in range(3)), ())
    fleet = Fleet(start)
    synced = Synced(start, fleet.head)
    state = start
    for number in range(3, 3 + RECENT_KEEP):
        state = doc.record(state, change(number))
        fleet.append([change(number)], state)
    assert new_since(synced, fleet.head) is None
