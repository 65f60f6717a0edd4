"""A layered retired history reads exactly as the plain history it stands for, after any run of deltas: the
same values in the same order, the same details, the same loose forms, the same keep (count and age)."""

from __future__ import annotations

from collections.abc import Generator
from types import MappingProxyType
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.sets import retired as retired_module
from argwatch.server.sets.normalise import LOOSE, normaliser
from argwatch.server.sets.overlay import with_delta
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.payload import DeltaUpdate, Retirement
from argwatch.server.sets.retired import LayeredHistory, RetiredHistory, RetiredKeep
from argwatch.server.sets.scoped import within_scope
from tests.snapshots import make_snapshot

_loose = within_scope(normaliser(LOOSE))
T = TypeVar("T")
# Few distinct values, some sharing a loose form (Ab, ab, A-b), so values come back, move and collide.
VALUES = ["Ab", "ab", "A-b", "c", "C", "d", "e_f", "E-F", "g", "h"]
deltas = st.lists(
    st.tuples(st.lists(st.sampled_from(VALUES), max_size=3), st.lists(st.sampled_from(VALUES), max_size=3)),
    max_size=40,
)


def reference_after(history: RetiredHistory, removed, added, replaced, now: float, keep: RetiredKeep):
    """What updates.retired_after and RetiredHistory.keep_to make: the plain history, copied whole."""
    following = history.copy()
    for value in removed:
        following.retire(value, Retirement(now, replaced.get(value, "")))
    for value in added:
        following.restore(value)
    return following.keep_to(keep)


@settings(max_examples=300, deadline=None)
@given(
    start=st.lists(st.sampled_from(VALUES), unique=True, max_size=6),
    steps=deltas,
    newest=st.integers(1, 8),
    seconds=st.one_of(st.none(), st.integers(1, 6)),
    fold_at=st.sampled_from([1, 3, 512]),
    fold_chunk=st.sampled_from([1, 2, 4096]),
    hard_factor=st.sampled_from([2, 1000]),
)
def test_a_layered_history_reads_as_the_plain_one(
    start, steps, newest, seconds, fold_at, fold_chunk, hard_factor
) -> None:
    """Folds spread over deltas (a value or two a step), finished early by large layers, or not: each
    version reads as the plain history, while a fold is under way and once it is rebased on."""
    # The owner's own dates, out of order, and one undated value: the age must not read them as sorted.
    plain = RetiredHistory(
        (value, Retirement(None if n == 0 else float((n * 7) % 5), f"r{n}")) for n, value in enumerate(start)
    )
    layered = LayeredHistory.over(plain)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retired_module, "FOLD_AT", fold_at)
        patch.setattr(retired_module, "FOLD_CHUNK", fold_chunk)
        patch.setattr(retired_module, "FOLD_HARD_FACTOR", hard_factor)
        for number, (removed, added) in enumerate(steps, start=1):
            now = float(number)
            keep = RetiredKeep(newest, None if seconds is None else float(seconds), now)
            replaced = MappingProxyType({value: value.upper() for value in removed[:1]})
            plain = reference_after(plain, removed, added, replaced, now, keep)
            layered = layered.after(removed, added, replaced, now, keep)
            assert list(layered) == list(plain) and len(layered) == len(plain)
            assert dict(layered.items()) == dict(plain)
            assert layered.copy() == plain and layered.copy().loose == plain.loose
            for value in VALUES:
                assert (value in layered) == (value in plain)
                assert layered.get(value) == plain.get(value)
                form = _loose(value)
                assert (form in layered.loose_forms()) == (form in plain.loose_forms())
            assert set(layered.loose_forms()) == plain.loose_forms()


class CountedHistory(RetiredHistory):
    """A plain history that counts the passes over it (and copies of it)."""

    passes = 0

    def __iter__(self):
        CountedHistory.passes += 1
        return super().__iter__()

    def items(self):
        CountedHistory.passes += 1
        return super().items()

    def copy(self):
        CountedHistory.passes += 1
        return super().copy()


def test_a_delta_reads_none_of_the_history_until_the_layers_fold() -> None:
    """10,000 values kept: each delta retires one and restores one, which was a copy of the whole history
    each; now the base is read once when layered, then not again until the layers reach FOLD_AT."""
    base = CountedHistory((f"v{n}", Retirement(float(n), "")) for n in range(10_000))
    keep = RetiredKeep(newest=10_000)
    CountedHistory.passes = 0  # not counting its making
    history = LayeredHistory.over(base)
    assert CountedHistory.passes == 1  # its order, once
    steps = retired_module.FOLD_AT // 2 - 1  # each delta adds two layer entries: one new value, one dropped
    for number in range(steps):
        history = history.after([f"new{number}"], [f"v{number}"], {}, 20_000.0 + number, keep)
    assert CountedHistory.passes == 1
    assert len(history) == 10_000 and f"v{steps}" in history and "v0" not in history
    assert list(history)[-1] == f"new{steps - 1}"
    # One more delta folds the layers into a new base, which reads the same.
    history = history.after(["x", "y", "z"], [], {}, 30_000.0, keep)
    assert len(history) == 10_000 and list(history)[-3:] == ["x", "y", "z"]
    assert f"v{steps + 2}" not in history and f"v{steps + 3}" in history  # the three oldest went


def test_a_fold_is_spread_over_deltas_and_ends_on_a_new_base_with_its_dates_in_order() -> None:
    """100,000 values kept, with an age that passes one a delta: a fold was one delta's O(history) copy, then
    the next delta's sort of every date (the slowest delta, docs/performance.md). Now the new base is made a step a
    delta, FOLD_CHUNK values a step at most in Python, its dates merged in order as it is made; the history
    rebases on it within a bounded number of deltas and reads as the plain history."""
    size = 100_000
    history = LayeredHistory.over(RetiredHistory((f"v{n}", Retirement(float(n), "")) for n in range(size)))
    first_base = history._base  # private: which base the layers rest on is the point of the test
    deltas, folding = 0, 0
    while history._base is first_base:
        now = 200_000.0 + deltas
        history = history.after([f"new{deltas}"], [], {}, now, RetiredKeep(size, 200_000.0, now))
        folding += history._fold is not None
        deltas += 1
        assert deltas < retired_module.FOLD_AT + 2 * size // retired_module.FOLD_CHUNK + 10
    assert folding >= 2 * size // retired_module.FOLD_CHUNK  # the values, then their dates, a chunk a step
    assert history._base._dated is not None  # made by the fold: the next delta sorts nothing
    # Each delta retired one value: the age took the oldest dated before the delta's number, and the count
    # (100,000) the next oldest.
    expected = [f"v{n}" for n in range(deltas, size)] + [f"new{n}" for n in range(deltas)]
    assert list(history) == expected and len(history) == size
    # The next deltas read on the new base and fold again in time, as the plain history would.
    second_base = history._base
    for number in range(deltas, deltas + 600):
        now = 200_000.0 + number
        history = history.after([f"new{number}"], [], {}, now, RetiredKeep(size, 200_000.0, now))
    kept = list(history)
    assert kept[0] == f"v{number + 1}" and kept[-1] == f"new{number}" and len(history) == size
    assert history._base is not second_base


@settings(max_examples=200, deadline=None)
@given(
    base_dates=st.lists(st.integers(0, 30), max_size=20),
    recent_dates=st.lists(st.one_of(st.none(), st.integers(0, 30)), max_size=8),
    start=st.integers(0, 5),
    dropped_every=st.integers(2, 5),
    fold_chunk=st.sampled_from([1, 2, 3, 4096]),
)
def test_a_fold_merges_the_dates_in_order(base_dates, recent_dates, start, dropped_every, fold_chunk) -> None:
    """The new base's dates: the old base's from `start` less the dropped, and the recent layer's (undated
    ones left out), in order, however the recent ones fall among the old chunks."""
    dated = sorted((float(at), f"b{n}") for n, at in enumerate(base_dates))
    dropped = {value for n, (_, value) in enumerate(dated) if n % dropped_every == 0}
    recent = RetiredHistory(
        (f"r{n}", Retirement(None if at is None else float(at), "")) for n, at in enumerate(recent_dates)
    )
    expected = sorted(
        [entry for entry in dated[start:] if entry[1] not in dropped]
        + [(info.retired_at, value) for value, info in recent.items() if info.retired_at is not None]
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retired_module, "FOLD_CHUNK", fold_chunk)
        steps = retired_module._merged_dates(dated, start, dropped, recent)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                assert done.value == expected
                break


def test_a_fold_step_that_raises_fails_its_delta_and_the_fold_starts_again() -> None:
    """A step that raised (out of memory, say) left its generator done and the fold dead: no version after it
    rebased, and once the layers outgrew the fold, a delta waited for it for ever, holding the loop. Now that
    delta fails (the set keeps its version, as when a fold made in one step failed), the same delta again
    succeeds, and the history reads as the plain one and folds on."""
    original = retired_module._merged_dates
    failures = [MemoryError("injected")]

    def failing_once(*args):
        if failures:
            raise failures.pop()
        return (yield from original(*args))

    plain = RetiredHistory((f"v{n}", Retirement(float(n), "")) for n in range(50))
    layered = LayeredHistory.over(plain)
    bases, raised = [layered._base], 0  # held, so that no two are told apart by a reused id
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retired_module, "FOLD_AT", 4)
        patch.setattr(retired_module, "FOLD_CHUNK", 1)
        # Never finished in one delta: a dead fold then shows as no new base, not as a test that never ends.
        patch.setattr(retired_module, "FOLD_HARD_FACTOR", 1 << 30)
        patch.setattr(retired_module, "_merged_dates", failing_once)
        for number in range(200):
            now, value = 1_000.0 + number, f"new{number}"
            keep = RetiredKeep(1_000, 10_000.0, now)
            try:
                following = layered.after([value], [], {}, now, keep)
            except MemoryError:
                raised += 1
                following = layered.after([value], [], {}, now, keep)  # the delta again, on the same version
            plain = reference_after(plain, [value], [], {}, now, keep)
            layered = following
            assert list(layered) == list(plain) and dict(layered.items()) == dict(plain)
            if layered._base is not bases[-1]:
                bases.append(layered._base)
    assert raised == 1 and len(bases) >= 2  # the fold that failed a step, started again and rebased on


def run_steps(steps: Generator[None, None, T]) -> T:
    """A step generator run to its end, as the snapshot builder runs it; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            made: T = done.value
            return made


def reference_history(members, retired, retirements, keep: RetiredKeep) -> RetiredHistory:
    """What history_steps kept before its trims went by count only: every value read (of the plain list, only
    its last `newest`), members and values past the age left out, then the keep (count and age) applied whole."""
    oldest = keep.now - keep.seconds if keep.seconds is not None else None
    history = RetiredHistory()
    entries = [(value, retired_module._NO_DETAILS) for value in retired[-keep.newest :]]
    entries += list(retirements.items())  # a plain mapping is read whole (a Tailed one would be tailed)
    for value, info in entries:
        if value in members or (oldest is not None and info.retired_at is not None and info.retired_at < oldest):
            continue
        history.retire(value, info)
    return history.keep_to(keep)


@settings(max_examples=300, deadline=None)
@given(
    start=st.lists(st.sampled_from(VALUES), unique=True, max_size=8),
    dates=st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=8, max_size=8),
    plain_list=st.lists(st.sampled_from(VALUES), max_size=10),
    members=st.frozensets(st.sampled_from(VALUES), max_size=3),
    steps=deltas,
    newest=st.integers(1, 8),
    seconds=st.one_of(st.none(), st.integers(1, 6)),
    chunk=st.sampled_from([1, 2, 3, 1024]),
    fold_chunk=st.sampled_from([1, 2, 3, 4096]),
)
def test_a_history_layered_as_it_is_built_reads_as_the_plain_one(
    start, dates, plain_list, members, steps, newest, seconds, chunk, fold_chunk
) -> None:
    """A large set's snapshot holds its history layered, made a step at a time (layered_history_steps): from
    an owner's lists (both: plain values and values with details), trimmed by count a chunk at a time as they
    are read; and from the history a delta hands on when the set is rebuilt (a RetiredHistory, its keep
    applied through the layers). Each reads as the plain history, and with an age its dates are in order
    before any delta asks for them."""
    owner = {value: Retirement(None if at is None else float(at), "") for value, at in zip(start, dates, strict=False)}
    keep = RetiredKeep(newest, None if seconds is None else float(seconds), 7.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retired_module, "CHUNK", chunk)
        patch.setattr(retired_module, "FOLD_CHUNK", fold_chunk)
        patch.setattr(retired_module, "FOLD_AT", 2)  # layers fold during the deltas, as a busy set's do
        plain = reference_history(members, plain_list, owner, keep)
        assert run_steps(retired_module.history_steps("s", members, plain_list, owner, keep)) == plain
        layered = run_steps(retired_module.layered_history_steps("s", members, plain_list, owner, keep))
        assert list(layered) == list(plain) and layered.copy().loose == plain.loose
        if seconds is not None:
            assert layered._base._dated == sorted(
                (info.retired_at, value) for value, info in plain.items() if info.retired_at is not None
            )
        for number, (removed, added) in enumerate(steps, start=8):
            keep = RetiredKeep(newest, None if seconds is None else float(seconds), float(number))
            plain = reference_after(plain, removed, added, {}, float(number), keep)
            layered = layered.after(removed, added, {}, float(number), keep)
        # Rebuilt whole (updates.apply_delta: retired_after's copy), later and with a smaller keep: what it drops
        # is dropped a chunk a step.
        keep = RetiredKeep(max(1, newest - 1), None if seconds is None else float(seconds), len(steps) + 9.0)
        handed_on = layered.copy()
        rebuilt = run_steps(retired_module.layered_history_steps("s", frozenset(), (), handed_on, keep))
        expected = plain.copy().keep_to(keep)
        assert list(rebuilt) == list(expected) and dict(rebuilt.items()) == dict(expected)
        assert rebuilt.copy().loose == expected.loose
        assert set(rebuilt.loose_forms()) == expected.loose_forms()
        assert handed_on == layered.copy()  # read as it was handed on, never changed
        if len(expected) == len(handed_on):  # private: a keep that drops nothing copies nothing
            assert rebuilt._base.entries is handed_on


def test_the_first_delta_on_a_large_snapshot_rests_on_the_base_it_was_built_with() -> None:
    """The first delta after a snapshot layered its history then (order, loose forms' counts, every date
    sorted: O(history) in one delta, the slowest at retired_keep 100,000 with an age). The snapshot now
    holds it layered, and the delta only adds to the layers."""
    size = PACK_ABOVE + 10
    retired = {f"r{n}": Retirement(float(n), "") for n in range(20_000)}
    keep = RetiredKeep(20_000, 1e9, 30_000.0)
    snapshot = make_snapshot("big", 1, [f"m{n}" for n in range(size)], received_at=0.0, retirements=retired, keep=keep)
    history = snapshot.retirements
    assert isinstance(history, LayeredHistory) and history._base._dated is not None
    assert list(history) == list(retired) and "r5" in snapshot.retired and "m5" not in snapshot.retired
    following = with_delta(
        snapshot,
        DeltaUpdate("big", 1, 2, ("r7",), ("m3",), MappingProxyType({})),
        now=30_001.0,
        rules=(),
        keep=RetiredKeep(20_000, 1e9, 30_001.0),
    )
    assert following is not None and isinstance(following.retirements, LayeredHistory)
    assert following.retirements._base is history._base  # private: that the base was not made again
    assert list(following.retirements)[-1] == "m3" and "r7" not in following.retired


@settings(max_examples=300, deadline=None)
@given(
    dates=st.lists(st.one_of(st.none(), st.integers(0, 9), st.just(float("nan"))), max_size=12),
    newest=st.integers(1, 14),
    seconds=st.one_of(st.none(), st.integers(0, 9)),
    fold_chunk=st.sampled_from([1, 2, 3, 4096]),
)
def test_a_rebuild_keeps_what_keep_to_keeps_a_chunk_a_step(dates, newest, seconds, fold_chunk) -> None:
    """A history handed on to a rebuild has its keep applied a chunk a step (_kept_steps): the values keep_to
    keeps, in order, with their loose forms; the history itself when it drops none."""
    handed_on = RetiredHistory(
        (value, Retirement(None if at is None else float(at), "")) for value, at in zip(VALUES, dates, strict=False)
    )
    keep = RetiredKeep(newest, None if seconds is None else float(seconds), 10.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retired_module, "FOLD_CHUNK", fold_chunk)
        kept = run_steps(retired_module._kept_steps(handed_on, keep))
    expected = handed_on.copy().keep_to(keep)
    assert list(kept.items()) == list(expected.items()) and kept.loose == expected.loose
    assert (kept is handed_on) == (len(expected) == len(handed_on))
