"""A replaced large snapshot's tables are emptied a piece at a time, and only when nothing else reads them."""

from __future__ import annotations

import math

from argwatch.server.sets.let_go import base_tables, let_go_steps
from argwatch.server.sets.retired import CHUNK
from argwatch.server.sets.sharded import SHARD_ABOVE, SHARDS
from argwatch.server.sets.snapshot import ValueSetSnapshot
from tests.snapshots import make_snapshot

SIZE = SHARD_ABOVE + 1000


def large() -> ValueSetSnapshot:
    return make_snapshot("big", 1, [f"handle_{i:06d}" for i in range(SIZE)], received_at=0.0)


def test_tables_nothing_else_holds_are_emptied_a_shard_or_a_chunk_a_step() -> None:
    snapshot = large()
    tables = base_tables(snapshot)
    assert len(tables) == 2  # the sharded members and the member list the indexes point into
    del snapshot
    steps = sum(1 for _ in let_go_steps(tables))
    assert steps == SHARDS + math.ceil(SIZE / (CHUNK * 16)) and tables == []


def test_tables_a_reader_still_holds_are_left_whole() -> None:
    snapshot = large()
    reader = snapshot  # a call still judging against the old copy
    tables = base_tables(snapshot)
    del snapshot
    assert sum(1 for _ in let_go_steps(tables)) == 0
    assert len(reader.members) == SIZE and "handle_000007" in reader.members
    assert reader.loose_index.get("handle-000007") == "handle_000007"
