"""A set's retired history: values once legal, bounded by the policy's retired_keep, kept in the order retired.

A miss on a retired value reads `retired` (and names its replacement). An
owner is not trusted with the size of this history: one sent 3 members and 3
million retired values, which blocked Validate for 10-15 s and kept 800 MB; and
an owner that retires a member per delta grew it for ever, each delta costing
more than the one before. So the history is built a chunk at a time, every
value and replacement within MAX_VALUE_CHARS, and it keeps only the newest
`retired_keep` values (none known to be older than its age). It carries each
value's loose form, so that a delta costs O(history) in C, not a Python call
per retired value.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence, Set
from itertools import chain, islice
from typing import NamedTuple, Protocol, runtime_checkable

from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.payload import Retirement
from argwatch.server.sets.scoped import within_scope

CHUNK = 1024
MAX_VALUE_CHARS = 1024
# A scoped set's retired values are scope keys (scoped.py): their loose form keeps the scope as it is.
_loose = within_scope(normaliser(LOOSE))
_NO_DETAILS = Retirement(None, "")


class ValueTooLong(ValueError):
    """A member, retired value or replacement is longer than MAX_VALUE_CHARS: the update is refused whole."""


@runtime_checkable
class Tailed(Protocol):
    """Retirements that can give their last `count` entries without reading the rest (the wire's)."""

    def __len__(self) -> int: ...

    def tail(self, count: int) -> Mapping[str, Retirement]: ...


class RetiredKeep(NamedTuple):
    """How much retired history a set keeps (the policy's `retired_keep`): the `newest` values, as the owner
    lists them or as deltas retire them, and of those with a known retirement time, none older than `seconds`."""

    newest: int = 10_000
    seconds: float | None = None
    now: float = 0.0  # wall clock, for the age


KEEP_ALL = RetiredKeep(newest=1 << 62)


class RetiredHistory(dict[str, Retirement]):
    """Retired values, the oldest first (a dict keeps insertion order), each checked; `loose` holds each one's
    loose form. Once handed to a snapshot it is never changed: a delta works on a copy (a C-level dict
    copy)."""

    def __init__(self, entries: Iterable[tuple[str, Retirement]] = (), loose: Mapping[str, str] | None = None):
        super().__init__(entries)
        self.loose: dict[str, str] = dict(loose) if loose is not None else {value: _loose(value) for value in self}

    def copy(self) -> RetiredHistory:
        # dict.update from a dict into an empty one clones its table in C, faster than building it again from
        # items(); every delta on a large set makes one copy (docs/performance.md, churn.py).
        made = RetiredHistory.__new__(RetiredHistory)
        dict.update(made, self)
        made.loose = self.loose.copy()
        return made

    def retire(self, value: str, info: Retirement) -> None:
        """`value` retired now: the newest entry (if it was retired before, it moves to the end)."""
        if self.pop(value, None) is None:
            self.loose[value] = _loose(value)
        self[value] = info

    def restore(self, value: str) -> None:
        """`value` is legal again: no longer retired."""
        if self.pop(value, None) is not None:
            del self.loose[value]

    def keep_to(self, keep: RetiredKeep) -> RetiredHistory:
        """Drops the oldest past `keep.newest`, and, with an age, every value known to be older than it (a value
        with no date, or an owner's date out of order, can stand in front of older ones: the whole history is
        looked at, at most retired_keep values)."""
        going: list[str] = []
        if keep.seconds is not None:
            oldest = keep.now - keep.seconds
            going = [v for v, info in self.items() if info.retired_at is not None and info.retired_at < oldest]
        excess = len(self) - len(going) - keep.newest
        if excess > 0:
            gone = set(going)
            going += list(islice((value for value in self if value not in gone), excess))
        for value in going:
            del self[value]
            del self.loose[value]
        return self

    def loose_forms(self) -> frozenset[str]:
        return frozenset(self.loose.values())


def history_steps(
    name: str, members: Set[str], retired: Iterable[str], retirements: Mapping[str, Retirement], keep: RetiredKeep
) -> Generator[None, None, RetiredHistory]:
    """The history to keep, CHUNK values at a time (a step per chunk): the plain retired values in the owner's
    order, then those with details; none that is a member; each, and its replacement, at most MAX_VALUE_CHARS
    (ValueTooLong); never more than `keep.newest` held while it is built."""
    if isinstance(retirements, RetiredHistory) and not retired:
        # A history this gateway kept, after a delta (updates.apply_delta): already checked, in order, and
        # holding no member. A small set rebuilt whole on every delta must not pay per retired value. A copy
        # (C-level): the history handed in may be a snapshot's, which never changes.
        return retirements.copy().keep_to(keep)
    history = RetiredHistory()
    oldest = keep.now - keep.seconds if keep.seconds is not None else None
    # Only the last `newest` of each list can be kept: the rest is not even read (a slice of the wire's list:
    # no str made for the three million values before it). So at most `newest` are kept; fewer when some of
    # those are members, or too old.
    if isinstance(retired, Sequence) and len(retired) > keep.newest:
        retired = retired[len(retired) - keep.newest :]
    if isinstance(retirements, Tailed) and len(retirements) > keep.newest:
        retirements = retirements.tail(keep.newest)
    entries = chain(((value, _NO_DETAILS) for value in retired), retirements.items())
    while chunk := list(islice(entries, CHUNK)):
        for value, info in chunk:
            if len(value) > MAX_VALUE_CHARS or len(info.replaced_by) > MAX_VALUE_CHARS:
                raise ValueTooLong(f"{name}: a retired value or its replacement is longer than {MAX_VALUE_CHARS}")
            if value in members or (oldest is not None and info.retired_at is not None and info.retired_at < oldest):
                continue
            history.retire(value, info)
        if len(history) > keep.newest:
            history.keep_to(keep)  # once a chunk: never more than a chunk past the bound
        yield
    return history
