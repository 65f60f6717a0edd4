"""A set's retired history: values once legal, bounded by the policy's retired_keep, kept in the order retired.

A miss on a retired value reads `retired` (and names its replacement). An
owner is not trusted with the size of this history: one sent 3 members and 3
million retired values, which blocked Validate for 10-15 s and kept 800 MB; and
an owner that retires a member per delta grew it for ever, each delta costing
more than the one before. So the history is built a chunk at a time, every
value and replacement within MAX_VALUE_CHARS, and it keeps only the newest
`retired_keep` values (none known to be older than its age). It carries each
value's loose form, so that copying it costs O(history) in C, not a Python
call per retired value. A small set's delta works on such a copy; a large
set's (overlay.py) on a LayeredHistory, in O(delta + its layers), folded into
a new base once past FOLD_AT entries: the new base is made FOLD_CHUNK values a
delta while the layers go on (its dates merged, never sorted whole), and the
first version to find it made rebases on it in O(layers). A large set's
snapshot is built with its history already layered, its base made a step at a
time (layered_history_steps), so no delta pays O(history) to layer it (a
compaction keeps the layered history it has). What a fold costs is in
docs/performance.md.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping, Sequence, Set
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
    copy), or layers over it (LayeredHistory)."""

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
    if isinstance(retirements, RetiredHistory | LayeredHistory) and not retired:
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
            # Once a chunk: never more than a chunk past the bound. By count only: each value was held to the
            # age as it was read, and the age's scan of the whole history, every chunk, was O(history) a step.
            history.keep_to(RetiredKeep(keep.newest))
        yield
    return history


def layered_history_steps(
    name: str, members: Set[str], retired: Iterable[str], retirements: Mapping[str, Retirement], keep: RetiredKeep
) -> Generator[None, None, LayeredHistory]:
    """The history history_steps keeps, layered, for a large set whose deltas layer over it: the base's order,
    loose forms' counts and (with an age) dates made here a step at a time, where the first delta after a
    snapshot made them in one step, O(history). A history this gateway kept (retired_after's, for a set
    rebuilt after a delta) has the keep applied a chunk a step (_kept_steps), and is used as it is when the
    keep drops nothing: history_steps copied it and scanned every value for the age in one step."""
    if isinstance(retirements, RetiredHistory) and not retired:
        history = yield from _kept_steps(retirements, keep)
    else:
        history = yield from history_steps(name, members, retired, retirements, keep)
    order: list[str] = []
    values = iter(history)
    while chunk := list(islice(values, FOLD_CHUNK)):
        order += chunk
        yield
    counts: Counter[str] = Counter()
    forms = iter(history.loose.values())
    while chunk := list(islice(forms, FOLD_CHUNK)):
        counts.update(chunk)
        yield
    base = _HistoryBase(history, history.loose, counts, order)
    if keep.seconds is not None:
        base._dated = yield from _dates_steps(history)
    return _unlayered(base)


def _kept_steps(history: RetiredHistory, keep: RetiredKeep) -> Generator[None, None, RetiredHistory]:
    """`history` as keep_to would leave it, FOLD_CHUNK values a step: itself when the keep drops nothing, else
    the values kept copied into a new one. Checked, in order and holding no member when it was made (a
    snapshot's, or made for this rebuild, so never changed again): nothing is checked again. A large delta
    before a rebuild, or an age passing many values, drops thousands: dropped through a layered history's
    layers, a value at a time and then a whole fold, that was one step of tens of milliseconds."""
    oldest = keep.now - keep.seconds if keep.seconds is not None else None
    if oldest is None and len(history) <= keep.newest:
        return history

    def aged(chunk: list[tuple[str, Retirement]]) -> list[tuple[str, Retirement]]:
        # As keep_to: only a value dated before the oldest kept is past the age (never an undated one).
        if oldest is None:
            return chunk
        return [entry for entry in chunk if not (entry[1].retired_at is not None and entry[1].retired_at < oldest)]

    surviving = len(history)  # those the age keeps; then the newest `keep.newest` of them
    if oldest is not None:
        surviving, entries = 0, iter(history.items())
        while chunk := list(islice(entries, FOLD_CHUNK)):
            surviving += len(aged(chunk))
            yield
    skip = max(0, surviving - keep.newest)
    if surviving == len(history) and not skip:
        return history
    kept = RetiredHistory.__new__(RetiredHistory)
    kept.loose = {}  # in the values' order (keep_to leaves it in the order first retired: only looked up)
    find_loose = history.loose.__getitem__
    entries = iter(history.items())
    behind: list[str] = []
    while chunk := list(islice(entries, FOLD_CHUNK)):
        # Filtered again, not held from the count's pass: held, every entry's pair was freed in one step at the
        # end, and the longest step grew (bench/retired_history.py).
        chunk = aged(chunk)
        if skip:
            dropped = min(skip, len(chunk))
            chunk, skip = chunk[dropped:], skip - dropped
        kept.update(chunk)  # C-level, as the loose forms' look-ups below
        # The loose forms a chunk behind the values: the two dicts grow alike, and their resizes (each a C
        # copy of the whole dict) landed in the same step.
        kept.loose.update(zip(behind, map(find_loose, behind), strict=True))
        behind = [value for value, _ in chunk]
        yield
    kept.loose.update(zip(behind, map(find_loose, behind), strict=True))
    return kept


def _dates_steps(entries: Mapping[str, Retirement]) -> Generator[None, None, list[tuple[float, str]]]:
    """`entries`' dated values by date (as _HistoryBase.dated sorts them), a step at a time: each chunk sorted,
    then the sorted chunks merged a chunk a step."""
    runs: list[list[tuple[float, str]]] = []
    items = iter(entries.items())
    while chunk := list(islice(items, FOLD_CHUNK)):
        run = [(at, value) for value, (at, _) in chunk if at is not None]
        run.sort()
        runs.append(run)
        yield
    if len(runs) <= 1:
        return runs[0] if runs else []
    dated: list[tuple[float, str]] = []
    merging = heapq.merge(*runs)  # (date, value) pairs are distinct: the order sorting all of them gives
    while merged := list(islice(merging, FOLD_CHUNK)):
        dated += merged
        yield
    return dated


# Layer entries (values retired since the base, and base values no longer retired) past which the next delta
# starts to fold a layered history into a new base: O(history), spread over the deltas that follow (_Fold).
FOLD_AT = 512


class _HistoryBase:
    """A frozen history a layered one rests on, with what reading it past its layers needs: its values and
    their loose forms, its order (the oldest first), how many of its values share each loose form, and its
    dated values by date (made when an age is first asked for)."""

    __slots__ = ("_dated", "entries", "loose", "loose_counts", "order")

    def __init__(
        self,
        entries: dict[str, Retirement],
        loose: dict[str, str],
        loose_counts: dict[str, int] | None = None,
        order: list[str] | None = None,
    ) -> None:
        """The counts and the order where the caller has them (a fold works them out a step at a time);
        made here otherwise (O(history), once, when a snapshot's history is first layered)."""
        self.entries, self.loose = entries, loose  # never changed
        self.order = order if order is not None else list(entries)
        self.loose_counts: dict[str, int] = loose_counts if loose_counts is not None else Counter(loose.values())
        self._dated: list[tuple[float, str]] | None = None

    @classmethod
    def of(cls, history: RetiredHistory) -> _HistoryBase:
        return cls(history, history.loose)

    def dated(self) -> list[tuple[float, str]]:
        if self._dated is None:
            self._dated = sorted((at, value) for value, (at, _) in self.entries.items() if at is not None)
        return self._dated


class LayeredHistory(Mapping[str, Retirement]):
    """A retired history as a frozen base and two small layers: the values retired since (the newest last)
    and the base's values no longer retired (restored, retired again, or past the keep). A delta makes the
    next one in O(delta + layers), where a copy of the whole history made every delta on a large set cost
    the history (10,000 values by default); the layers fold into a new base once past FOLD_AT. Reads as the
    RetiredHistory it stands for: the same values, in the same order, with the same loose forms."""

    __slots__ = (
        "_base",
        "_dated_from",
        "_dropped",
        "_dropped_loose",
        "_fold",
        "_oldest",
        "_recent",
        "_recent_loose",
        "_size",
    )

    def __init__(
        self,
        base: _HistoryBase,
        recent: RetiredHistory,
        dropped: frozenset[str],
        dropped_loose: Mapping[str, int],
        recent_loose: Mapping[str, int],
        oldest: int,
        dated_from: int,
        fold: _Fold | None = None,
    ) -> None:
        self._base, self._recent, self._dropped = base, recent, dropped
        self._dropped_loose, self._recent_loose = dropped_loose, recent_loose
        self._oldest = oldest  # base.order[:oldest] are all dropped: where the oldest still kept is looked for
        self._dated_from = dated_from  # likewise in base.dated(): those before it are all past the age
        self._fold = fold  # the next base, being built from an earlier version of this history
        self._size = len(base.entries) - len(dropped) + len(recent)

    @classmethod
    def over(cls, history: RetiredHistory | LayeredHistory) -> LayeredHistory:
        """`history` layered: itself if it is, else its values as a base (O(history), once; a large set's
        snapshot holds its history layered already: layered_history_steps)."""
        if isinstance(history, LayeredHistory):
            return history
        return _unlayered(_HistoryBase.of(history))

    def get(self, value: str, default: Retirement | None = None) -> Retirement | None:  # type: ignore[override]
        found = self._recent.get(value)
        if found is not None:
            return found
        return default if value in self._dropped else self._base.entries.get(value, default)

    def __getitem__(self, value: str) -> Retirement:
        found = self.get(value)
        if found is None:
            raise KeyError(value)
        return found

    def __contains__(self, value: object) -> bool:
        return value in self._recent or (value in self._base.entries and value not in self._dropped)

    def __iter__(self) -> Iterator[str]:
        dropped = self._dropped
        kept = (value for value in islice(self._base.order, self._oldest, None) if value not in dropped)
        return chain(kept, self._recent)

    def __len__(self) -> int:
        return self._size

    def has_loose(self, form: str) -> bool:
        """Whether a value kept has this loose form."""
        if form in self._recent_loose:
            return True
        return self._base.loose_counts.get(form, 0) > self._dropped_loose.get(form, 0)

    def loose_forms(self) -> LooseForms:
        return LooseForms(self)

    def copy(self) -> RetiredHistory:
        """The history as a plain RetiredHistory (a new one: a small set rebuilt whole owns it)."""
        made = RetiredHistory.__new__(RetiredHistory)
        entries, recent = self._base.entries, self._recent
        dict.update(made, entries)  # a C-level clone, then the layers' few changes
        made.loose = self._base.loose.copy()
        for value in self._dropped:
            del made[value]
            del made.loose[value]
        dict.update(made, recent)
        made.loose.update(recent.loose)
        return made

    def after(
        self,
        removed: Iterable[str],
        added: Iterable[str],
        replaced_by: Mapping[str, str],
        now: float,
        keep: RetiredKeep,
    ) -> LayeredHistory:
        """The history after a delta (as updates.retired_after and keep_to make it): the values it removes
        retired now (the newest), those it adds no longer retired, then the keep applied."""
        base = self._base
        entries, base_loose = base.entries, base.loose
        recent = self._recent.copy()
        recent_loose, dropped_loose = dict(self._recent_loose), dict(self._dropped_loose)
        dropped = set(self._dropped)

        def drop_from_base(value: str) -> None:
            """`value`, as the base keeps it, is no longer kept (the base and the recent layer share no value)."""
            if value in entries and value not in dropped and value not in recent.loose:
                dropped.add(value)
                _count(dropped_loose, base_loose[value], 1)

        def take_out(value: str) -> None:
            """`value` is no longer retired, wherever it is kept."""
            form = recent.loose.get(value)
            if form is not None:
                recent.restore(value)
                _count(recent_loose, form, -1)
            else:
                drop_from_base(value)

        for value in removed:
            take_out(value)
            recent.retire(value, Retirement(now, replaced_by.get(value, "")))
            _count(recent_loose, recent.loose[value], 1)
        for value in added:
            take_out(value)
        dated_from = self._dated_from
        if keep.seconds is not None:
            oldest_kept = keep.now - keep.seconds
            dated = base.dated()
            while dated_from < len(dated) and dated[dated_from][0] < oldest_kept:
                drop_from_base(dated[dated_from][1])  # its date as the base has it: if retired since, kept
                dated_from += 1
            for value in [v for v, (at, _) in recent.items() if at is not None and at < oldest_kept]:
                take_out(value)
        oldest = self._oldest
        excess = len(entries) - len(dropped) + len(recent) - keep.newest
        while excess > 0:
            while oldest < len(base.order) and base.order[oldest] in dropped:
                oldest += 1
            if oldest < len(base.order):
                drop_from_base(base.order[oldest])
            else:
                take_out(next(iter(recent)))
            excess -= 1
        fold = self._fold
        following = LayeredHistory(
            base, recent, frozenset(dropped), dropped_loose, recent_loose, oldest, dated_from, fold
        )
        layers = len(recent) + len(dropped)
        if fold is None:
            if layers <= FOLD_AT:
                return following
            following._fold = fold = _Fold(following)
        # A fold a chunk a delta. A delta makes a whole one only when the layers have outgrown the fold, which
        # a delta as large as the history (or an age passing most of it) does, at a cost like its own.
        folded = fold.finish() if layers > FOLD_HARD_FACTOR * FOLD_AT else fold.advance()
        return following._rebased(fold.source, folded) if folded is not None else following

    def _rebased(self, source: LayeredHistory, base: _HistoryBase) -> LayeredHistory:
        """This history over `base`, the history `source` (an earlier version of it) folded: the layers are
        what changed since `source`. In O(layers): `source`'s recent values that are untouched since (the same
        Retirement, so in the same place) now stand in the base; the rest of this one's recent layer stays
        recent; its dropped values, and `source`'s recent values since restored or retired again, are dropped
        from the new base."""
        recent_before = source._recent
        carried = {value for value, info in recent_before.items() if self._recent.get(value) is info}
        recent = RetiredHistory.__new__(RetiredHistory)
        recent.loose = {}
        for value, info in self._recent.items():
            if value not in carried:
                recent[value] = info
                recent.loose[value] = self._recent.loose[value]
        dropped = (self._dropped - source._dropped) | (recent_before.keys() - carried)
        loose = base.loose
        dropped_loose: dict[str, int] = {}
        for value in dropped:
            _count(dropped_loose, loose[value], 1)
        recent_loose: dict[str, int] = {}
        for form in recent.loose.values():
            _count(recent_loose, form, 1)
        # Where the oldest kept and the oldest dated are looked for starts again at the new base's first:
        # the values before them are dropped, and each is passed over once more.
        return LayeredHistory(base, recent, frozenset(dropped), dropped_loose, recent_loose, 0, 0)


def _unlayered(base: _HistoryBase) -> LayeredHistory:
    """`base` as a layered history with nothing on it yet."""
    return LayeredHistory(base, RetiredHistory(), frozenset(), {}, {}, 0, 0)


# Values a fold copies a delta. A delta's layers past FOLD_HARD_FACTOR * FOLD_AT (deltas large next to the
# history) make it finish the fold there and then, as every fold did before it was spread.
FOLD_CHUNK = 4096
FOLD_HARD_FACTOR = 8


class _Fold:
    """A new base made from `source` (a version of a layered history, which never changes) FOLD_CHUNK values
    a step: a fold made in one step was O(history) in one delta (at retired_keep 100,000 with an age, the
    slowest delta, docs/performance.md). The versions that follow `source` carry it and each takes
    a step; the first to see it done rebases on it (LayeredHistory._rebased)."""

    __slots__ = ("_made", "_steps", "source")

    def __init__(self, source: LayeredHistory) -> None:
        self.source = source
        self._steps = _base_steps(source)
        self._made: _HistoryBase | None = None

    def advance(self) -> _HistoryBase | None:
        """One step; the new base once made. A step that raises (out of memory) fails its delta, as a fold made in
        one step did, and the next step starts the fold again: a generator that raised is done, and one left so
        would never make the base (and `finish` would wait for it for ever)."""
        if self._made is None:
            try:
                next(self._steps)
            except StopIteration as done:
                self._made = done.value
            except BaseException:
                self._steps = _base_steps(self.source)  # the source never changes: the same base, from the start
                raise
        return self._made

    def finish(self) -> _HistoryBase:
        made = self.advance()
        while made is None:
            made = self.advance()
        return made


def _base_steps(source: LayeredHistory) -> Generator[None, None, _HistoryBase]:
    """`source` as a base with no layers, a step at a time, none O(history) in Python: its values and loose
    forms (C-level copies of the old base's, less the dropped, then the recent layer's: a dict built a value
    at a time paid its last resize, O(history), in one step), their order, their loose forms' counts (the
    old base's with the layers' changes: counting every form again was most of a fold's time), and, where the
    old base's dates were sorted (the keep has an age), its dates: the old base's still kept merged with the
    recent layer's, never sorted whole (sorting 100,000 dates was the slowest delta's time)."""
    old, recent, dropped = source._base, source._recent, source._dropped
    entries = dict.copy(old.entries)  # an exact dict, cloned in C, not a RetiredHistory built again
    yield
    loose = dict.copy(old.loose)
    yield
    dropping = iter(dropped)
    while chunk := list(islice(dropping, FOLD_CHUNK)):
        for value in chunk:
            del entries[value]
            del loose[value]
        yield
    entries.update(recent)
    loose.update(recent.loose)
    counts = dict.copy(old.loose_counts)  # a clone in C (dict(...) inserts each again)
    for form, count in source._dropped_loose.items():
        _count(counts, form, -count)
    for form, count in source._recent_loose.items():
        _count(counts, form, count)
    yield
    order: list[str] = []
    kept = islice(old.order, source._oldest, None)
    while chunk := list(islice(kept, FOLD_CHUNK)):
        order += [value for value in chunk if value not in dropped]
        yield
    order += recent
    made = _HistoryBase(entries, loose, counts, order)
    if old._dated is not None:
        made._dated = yield from _merged_dates(old._dated, source._dated_from, dropped, recent)
    return made


def _merged_dates(
    dated: list[tuple[float, str]], start: int, dropped: Set[str], recent: RetiredHistory
) -> Generator[None, None, list[tuple[float, str]]]:
    """The dates of a base's kept values (`dated[start:]` less `dropped`) and of `recent`, in order, a chunk
    a step: the recent layer's (a few hundred) go into the chunk of the base's they fall within."""
    newer = sorted((at, value) for value, (at, _) in recent.items() if at is not None)
    merged: list[tuple[float, str]] = []
    taken = 0
    for low in range(start, len(dated), FOLD_CHUNK):
        chunk = [entry for entry in dated[low : low + FOLD_CHUNK] if entry[1] not in dropped]
        if chunk:
            upto = bisect_right(newer, chunk[-1], taken)
            if upto > taken:
                chunk += newer[taken:upto]
                chunk.sort()
                taken = upto
            merged += chunk
        yield
    merged += newer[taken:]
    return merged


class LooseForms(Collection[str]):
    """The loose forms of a layered history's values, read through it (no set of them is made per delta)."""

    __slots__ = ("_history",)

    def __init__(self, history: LayeredHistory) -> None:
        self._history = history

    def __contains__(self, form: object) -> bool:
        return isinstance(form, str) and self._history.has_loose(form)

    def __iter__(self) -> Iterator[str]:
        return iter({_loose(value) for value in self._history})

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _count(counts: dict[str, int], form: str, by: int) -> None:
    left = counts.get(form, 0) + by
    if left:
        counts[form] = left
    else:
        del counts[form]
