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


def test_an_expiry_noticed_late_reverts_no_override_set_since() -> None:
    """A replica restarted from its state file expires Ana's override, which the fleet had cleared and Bob had set
    again since (with no expiry): Bob's stays."""
    common = doc.apply(
        ModeDocument(), OverrideRequest(Target("refund_order"), Mode.REJECT, "ana", "INC-1", 3600), TOOLS, NOW
    )[0]
    shared = change(change(common, "refund_order", None, NOW + 60), "refund_order", Mode.REJECT, NOW + 600, "INC-2")
    local, (expiry,) = doc.expire(common, TOOLS, NOW + 7200)
    merged = merge(shared, local, KEEP)
    assert merged.override("refund_order") == shared.override("refund_order")
    assert expiry in merged.audit  # what the replica did is audited all the same
    still_due = change(common, "create_ticket", Mode.REJECT, NOW + 5)  # Redis still holds Ana's, expired by then
    assert merge(still_due, local, KEEP).override("refund_order") is None


def test_an_override_whose_entry_redis_cut_survives_a_restart_of_redis_written_by_a_replica_that_knew_none() -> None:
    """Redis restarted empty; a replica restarted without a state file wrote first (a refusal, no overrides). Ana's
    override of weeks ago, whose entry is older than the 1,000 Redis keeps, is kept from the replicas holding it."""
    held = change(ModeDocument(), "refund_order", Mode.OBSERVE, NOW, "false positives")
    for second in range(1, 12):
        held = change(held, "create_ticket", (Mode.REJECT, None)[second % 2], NOW + second)
    held = doc.from_json(doc.to_json(held, 10, 10))  # every replica adopted Redis's copy: Ana's entry is cut
    assert all(entry.target != "refund_order" for entry in held.audit)
    fresh = refuse(ModeDocument(), NOW + 5000)
    merged = merge(fresh, held, (10, 10))
    assert merged.override("refund_order") == held.override("refund_order")


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


times = st.lists(st.integers(0, 6), max_size=12)  # few distinct times: ties, and entries stamped out of order


@settings(max_examples=300, deadline=None)
@given(common=times, first=times, second=times)
def test_two_replicas_writing_back_what_redis_lacks_fall_quiet(
    common: list[int], first: list[int], second: list[int]
) -> None:
    """Redis keeps the newest 4 audit entries and 2 refusals; two replicas each audited some by themselves.
    Each re-read merges what Redis lacks into it or adopts it; after a write by each, nothing is missing from
    Redis and no replica writes again (entries at equal times, or older than the oldest Redis kept, are cut,
    not written back for ever), and nothing newer than what Redis cut is lost."""
    keep = (4, 2)

    def audited(document: ModeDocument, stamps: list[int], who: str) -> ModeDocument:
        for n, stamp in enumerate(stamps):
            entry = (
                refusal_entry(NOW + stamp, who, f"refusal {n}")
                if n % 3 == 0
                else doc.ModeChange(NOW + stamp, who, "@policy", "", "", f"reload {n}", None, "applied")
            )
            document = doc.record(document, entry)
        return document

    start = audited(ModeDocument(), common, "fleet")
    redis = doc.to_json(start, *keep)
    replicas = [audited(start, first, "r1"), audited(start, second, "r2")]
    writes = []
    for _ in range(4):
        for n, local in enumerate(replicas):
            shared = doc.from_json(redis)
            if missing_from(shared, local, keep):
                replicas[n] = merge(shared, local, keep)
                redis = doc.to_json(replicas[n], *keep)
                writes.append(n)
            else:
                replicas[n] = shared
    assert len(writes) <= 2
    final = doc.from_json(redis)
    assert all(not missing_from(final, local, keep) for local in replicas)
    for key, most in (("audit", keep[0]), ("refused", keep[1])):
        kept = getattr(final, key)
        oldest = kept[0].at if len(kept) >= most else float("-inf")
        every = {
            entry
            for local in (start, *[audited(start, s, w) for s, w in ((first, "r1"), (second, "r2"))])
            for entry in getattr(local, key)
        }
        assert {entry for entry in every if entry.at > oldest} <= set(kept)
