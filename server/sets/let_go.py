"""Lets go of a replaced large snapshot's tables a piece at a time: freeing a million entries at once stalls the loop.

When a large set's copy is replaced (a new snapshot, or a compaction's new
base), the old tables are freed by reference counting, all at once, wherever
the last reference goes: a stall of tens of milliseconds at a million members
(docs/performance.md). Here the old member shards and member list are emptied
a shard or a chunk at a step instead, with the loop running between steps.

A table is emptied only if nothing but this holds it (its reference count
says so): a reader still holding the old snapshot (a call waiting on a
look-up, a save in progress) keeps it whole, and frees it itself later.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from argwatch.server.sets.compact_index import CompactIndex
from argwatch.server.sets.overlay import OverlayIndex, OverlaySet
from argwatch.server.sets.retired import CHUNK
from argwatch.server.sets.sharded import ShardedSet
from argwatch.server.sets.snapshot import ValueSetSnapshot


def _only_here() -> int:
    """What getrefcount says of an object held by one local only, measured in the shape let_go_steps uses:
    how a call's argument and a local are counted differs between CPython versions."""
    probe: list[object] = [object()]
    table = probe.pop()
    return sys.getrefcount(table)


_ONLY_HERE = _only_here()


def base_tables(snapshot: ValueSetSnapshot) -> list[object]:
    """The large tables a snapshot's members and indexes rest on: its sharded members and its member list."""
    members = snapshot.members.base if isinstance(snapshot.members, OverlaySet) else snapshot.members
    index = snapshot.loose_index.base if isinstance(snapshot.loose_index, OverlayIndex) else snapshot.loose_index
    tables: list[object] = []
    if isinstance(members, ShardedSet):
        tables.append(members)
    if isinstance(index, CompactIndex) and isinstance(index.members, list):
        tables.append(index.members)
    return tables


def let_go_steps(tables: list[object]) -> Iterator[None]:
    """Empties each table that only `tables` holds, a shard or CHUNK * 16 entries a step; leaves the others
    to their holders. `tables` must be the caller's only reference to them (the snapshot already dropped)."""
    while tables:
        table = tables.pop()
        if sys.getrefcount(table) > _ONLY_HERE:
            continue  # still read elsewhere
        if isinstance(table, ShardedSet):
            yield from table.empty_steps()
        elif isinstance(table, list):
            while table:
                del table[-CHUNK * 16 :]
                yield
