"""Redis's copy of the mode state and a replica's, made one: nothing either holds is lost, and each override
follows its target's latest change. Versions decide nothing (a replica bumps its own for what it audits alone)."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeDocument, OverrideRequest, PolicyModes, Target
from argwatch.server.modes.merge import merge, missing_from
from argwatch.server.modes.store import refusal_entry
from argwatch.server.policy.model import Mode

TOOLS = PolicyModes(MappingProxyType({"refund_order": Mode.REJECT, "create_ticket": Mode.OBSERVE}), Mode.OBSERVE)
KEEP = (1000, 100)
NOW = 1_800_000_000.0


def change(document: ModeDocument, tool: str, mode: Mode | None, at: float, reason: str = "INC-1") -> ModeDocument:
    changed, entry = doc.apply(document, OverrideRequest(Target(tool), mode, "ana", reason), TOOLS, at)
    assert not entry.refused
    return changed


def refuse(document: ModeDocument, at: float) -> ModeDocument:
    return doc.record(document, refusal_entry(at, "eve", "the shared mode store (Redis) is unreachable"))


def test_a_replica_that_refused_alone_keeps_the_change_another_made_meanwhile() -> None:
    """What lost a change confirmed by Redis's replica: this replica's version passed Redis's by its own refusals."""
    common = change(ModeDocument(), "refund_order", Mode.OBSERVE, NOW)
    local = refuse(refuse(refuse(common, NOW + 1), NOW + 2), NOW + 3)
    shared = change(common, "refund_order", Mode.REJECT, NOW + 2, reason="CHG-18")
    assert local.version > shared.version
    merged = merge(shared, local, KEEP)
    assert merged.override("refund_order").mode is Mode.REJECT  # type: ignore[union-attr]
    assert set(shared.entries()) | set(local.entries()) == set(merged.entries())
    assert merged.version > local.version
    assert [entry.at for entry in merged.refused] == [NOW + 1, NOW + 2, NOW + 3]


def test_a_change_redis_lost_comes_back_beside_one_made_since_on_another_target() -> None:
    common = change(ModeDocument(), "refund_order", Mode.OBSERVE, NOW)
    local = change(common, "create_ticket", Mode.REJECT, NOW + 1, reason="answered with the warning")
    shared = change(common, "refund_order", Mode.REJECT, NOW + 2, reason="made on the new primary")
    merged = merge(shared, local, KEEP)
    assert merged.override("create_ticket").mode is Mode.REJECT  # type: ignore[union-attr]
    assert merged.override("refund_order").mode is Mode.REJECT  # type: ignore[union-attr]
    assert [entry.reason for entry in merged.audit] == ["INC-1", "answered with the warning", "made on the new primary"]


def test_the_later_change_of_a_target_wins_whichever_side_made_it() -> None:
    common = change(ModeDocument(), "refund_order", Mode.OBSERVE, NOW)
    earlier_here = change(common, "refund_order", None, NOW + 1)
    later_there = change(common, "refund_order", Mode.REJECT, NOW + 2)
    assert merge(later_there, earlier_here, KEEP).override("refund_order").mode is Mode.REJECT  # type: ignore[union-attr]
    later_here = change(common, "refund_order", None, NOW + 3)
    assert merge(later_there, later_here, KEEP).override("refund_order") is None


def test_nothing_missing_gives_redis_copy_itself_even_at_a_lower_version() -> None:
    local = change(ModeDocument(), "refund_order", Mode.OBSERVE, NOW)
    shared = change(local, "create_ticket", Mode.REJECT, NOW + 1)
    assert merge(shared, local, KEEP) is shared
    assert missing_from(shared, local, KEEP) == []


def test_entries_older_than_redis_keeps_are_not_missing_from_it() -> None:
    local = ModeDocument()
    for second in range(12):
        local = change(local, "refund_order", (Mode.OBSERVE, Mode.REJECT)[second % 2], NOW + second)
    shared = doc.from_json(doc.to_json(local, 5, 5))  # Redis keeps the newest 5
    assert missing_from(shared, local, (5, 5)) == []
    assert missing_from(shared, local, (6, 6)) == list(local.audit[:7])  # had it kept 6, 7 would be missing


def test_an_expiry_both_sides_made_by_themselves_is_audited_once() -> None:
    common = doc.apply(
        ModeDocument(), OverrideRequest(Target("refund_order"), Mode.OBSERVE, "ana", "INC-1", 60), TOOLS, NOW
    )[0]
    shared, _ = doc.expire(common, TOOLS, NOW + 61)
    local, _ = doc.expire(common, TOOLS, NOW + 62)  # another replica's clock, another entry for the same expiry
    assert missing_from(shared, local, KEEP) == []
    assert merge(shared, local, KEEP) is shared


TARGETS = ("refund_order", "create_ticket")
steps = st.lists(st.tuples(st.sampled_from(TARGETS), st.sampled_from([Mode.OBSERVE, Mode.REJECT, None, "refuse"])))


def played(document: ModeDocument, moves: list[tuple[str, object]], times: list[float]) -> ModeDocument:
    for (tool, mode), at in zip(moves, times, strict=True):
        document = refuse(document, at) if mode == "refuse" else change(document, tool, mode, at)  # type: ignore[arg-type]
    return document


@settings(max_examples=200, deadline=None)
@given(common=steps, theirs=steps, ours=steps)
def test_merging_loses_no_entry_and_each_override_is_its_latest_changes(
    common: list[tuple[str, object]], theirs: list[tuple[str, object]], ours: list[tuple[str, object]]
) -> None:
    start = played(ModeDocument(), common, [NOW + i for i in range(len(common))])
    after = NOW + len(common)
    # Both sides go on apart, at distinct times, interleaved (Redis's even, ours odd).
    shared = played(start, theirs, [after + 2 * i for i in range(len(theirs))])
    local = played(start, ours, [after + 2 * i + 1 for i in range(len(ours))])
    merged = merge(shared, local, KEEP)
    assert set(shared.entries()) | set(local.entries()) == set(merged.entries())
    assert merged.version >= shared.version
    for tool in TARGETS:
        changes = [entry for entry in merged.audit if entry.target == tool]
        override = merged.override(tool)
        if not changes or changes[-1].outcome == "cleared":
            assert override is None
        else:
            assert override is not None and (override.mode.value, override.set_at) == (changes[-1].new, changes[-1].at)
