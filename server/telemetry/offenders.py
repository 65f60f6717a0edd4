"""Recent offending values per tool and argument, counted and clustered, for on-call (Admin.ListSamples).

Enum drift shows up as a cluster: a renamed value emitted again and again, so
one or two values hold most of the misses. Inventions scatter. Only a set miss
of shape `invented` is an invention: an id its record look-up did not find or
found another customer's, a value out of range, is an offending value and no
invention, so each table also counts its set misses and inventions. Every offending
value is counted here (the problem path only, never the clean path), in a
table per (tool, argument) bounded to MAX_VALUES distinct values; values beyond
that are counted as one "(other values)" row, so memory cannot grow with what a
model writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_VALUES = 256
OTHER = "(other values)"
# A cluster: the two most frequent values hold at least this share of at least MIN_MISSES misses.
CLUSTER_SHARE = 0.8
MIN_MISSES = 10
INVENTED = "invented"  # the one shape that is an invention (other_scope is another customer's real member)


@dataclass
class _Seen:
    count: int
    shape: str
    last_seen: float


@dataclass(frozen=True, slots=True)
class OffenderRow:
    value: str
    count: int
    shape: str
    last_seen: float


@dataclass(frozen=True, slots=True)
class Offenders:
    rows: tuple[OffenderRow, ...]  # most frequent first
    total: int
    top_two_share: float
    clustered: bool  # one or two values hold most misses: likely enum drift
    out_of_set: int = 0  # of `total`, values that missed a value set (every one with a shape)
    invented: int = 0  # of those, values of shape `invented`: the only inventions


@dataclass
class _Kinds:
    """Counted at each add, so values beyond MAX_VALUES (one "(other values)" row, its shape lost) still count."""

    out_of_set: int = 0
    invented: int = 0


class OffenderTable:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._tables: dict[tuple[str, str], dict[str, _Seen]] = {}
        self._kinds: dict[tuple[str, str], _Kinds] = {}

    def add(self, tool: str, argument: str, value: str, shape: str) -> None:
        """Counts one offending value (tool and argument are metric labels: policy names or _unknown)."""
        table = self._tables.setdefault((tool, argument), {})
        if shape:
            kinds = self._kinds.setdefault((tool, argument), _Kinds())
            kinds.out_of_set += 1
            kinds.invented += shape == INVENTED
        key = value if value in table or len(table) < MAX_VALUES else OTHER
        seen = table.get(key)
        if seen is None:
            table[key] = _Seen(1, shape if key != OTHER else "", self._clock())
        else:
            seen.count += 1
            seen.last_seen = self._clock()

    def offenders(self, tool: str, argument: str, limit: int = 20) -> Offenders:
        table = self._tables.get((tool, argument), {})
        ordered = sorted(table.items(), key=lambda item: (-item[1].count, item[0]))
        total = sum(seen.count for _, seen in ordered)
        top_two = sum(seen.count for value, seen in ordered[:2] if value != OTHER)
        share = top_two / total if total else 0.0
        rows = tuple(OffenderRow(value, seen.count, seen.shape, seen.last_seen) for value, seen in ordered[:limit])
        kinds = self._kinds.get((tool, argument)) or _Kinds()
        clustered = total >= MIN_MISSES and share >= CLUSTER_SHARE
        return Offenders(rows, total, share, clustered, kinds.out_of_set, kinds.invented)

    def keys(self) -> list[tuple[str, str]]:
        return sorted(self._tables)
