"""The mode store: overrides per tool and global, expiry, refusals, and an audit that survives a restart."""

from __future__ import annotations

import pytest

from argwatch.server.modes.store import GLOBAL, ModeRefused, ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode

POLICY = parse_policy(b"tools: {refund_order: {mode: reject}, create_ticket: {}}\n", "/p.yaml")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def store(tmp_path, clock: Clock) -> ModeStore:
    return ModeStore(POLICY, state_file=str(tmp_path / "modes.json"), clock=clock)


def test_overrides_take_precedence_global_first(tmp_path) -> None:
    modes = store(tmp_path, Clock())
    assert (modes.mode_for("refund_order"), modes.mode_for("create_ticket")) == (Mode.REJECT, Mode.OBSERVE)
    modes.set_mode("create_ticket", Mode.REJECT, actor="ana", reason="INC-1: tickets to ghosts")
    assert modes.mode_for("create_ticket") is Mode.REJECT and modes.source_of("create_ticket")[0] == "override"
    modes.set_mode(GLOBAL, Mode.OBSERVE, actor="ana", reason="INC-2: stand down")
    assert {modes.mode_for(t) for t in ("refund_order", "create_ticket", "never_heard_of")} == {Mode.OBSERVE}
    modes.set_mode(GLOBAL, None, actor="ana", reason="INC-2 over")
    assert (modes.mode_for("refund_order"), modes.mode_for("create_ticket")) == (Mode.REJECT, Mode.REJECT)


def test_an_expiring_override_reverts_by_itself_and_says_so(tmp_path) -> None:
    clock = Clock()
    modes = store(tmp_path, clock)
    modes.set_mode("refund_order", Mode.OBSERVE, actor="ben", reason="INC-3", expires_in=600)
    clock.now += 599
    assert modes.expire_due() == [] and modes.mode_for("refund_order") is Mode.OBSERVE
    clock.now += 2
    (expired,) = modes.expire_due()
    assert (expired.target, expired.old, expired.new, expired.outcome) == (
        "refund_order",
        "observe",
        "reject",
        "expired",
    )
    assert "override by ben expired (INC-3)" in expired.reason
    assert modes.mode_for("refund_order") is Mode.REJECT


def test_refused_changes_are_audited_too(tmp_path) -> None:
    modes = store(tmp_path, Clock())
    with pytest.raises(ModeRefused, match="reason is required"):
        modes.set_mode("refund_order", Mode.OBSERVE, actor="eve", reason="  ")
    with pytest.raises(ModeRefused, match="no tool 'refund'"):
        modes.set_mode("refund", Mode.OBSERVE, actor="eve", reason="typo")
    assert [c.outcome for c in modes.changes()] == [
        "refused: the policy has no tool 'refund'",
        "refused: a reason is required",
    ]
    assert modes.mode_for("refund_order") is Mode.REJECT


def test_a_restart_keeps_overrides_and_the_audit(tmp_path) -> None:
    clock = Clock()
    first = store(tmp_path, clock)
    first.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-4")
    first.set_mode("create_ticket", Mode.REJECT, actor="ana", reason="INC-5", expires_in=60)
    clock.now += 3600  # the gateway was down while the second override expired
    again = store(tmp_path, clock)
    assert again.mode_for("refund_order") is Mode.OBSERVE  # the on-call's flip survives
    assert again.mode_for("create_ticket") is Mode.OBSERVE  # expired while down: reverted, and audited
    assert [(c.target, c.old, c.new, c.outcome) for c in again.changes()] == [
        ("create_ticket", "reject", "observe", "expired"),  # from the saved override, back to the policy
        ("create_ticket", "observe", "reject", "applied"),
        ("refund_order", "reject", "observe", "applied"),
    ]


def test_an_unreadable_state_file_refuses_to_start_rather_than_forget(tmp_path) -> None:
    (tmp_path / "modes.json").write_text("{broken")
    with pytest.raises(ModeRefused, match="cannot read the mode state file"):
        store(tmp_path, Clock())


def test_a_listener_hears_every_tool_once_then_only_the_tools_a_change_moves(tmp_path) -> None:
    modes = store(tmp_path, Clock())
    heard: list[tuple[str, Mode]] = []
    modes.subscribe(lambda tool, mode: heard.append((tool, mode)))
    assert heard == [("refund_order", Mode.REJECT), ("create_ticket", Mode.OBSERVE)]
    heard.clear()
    modes.set_mode("create_ticket", Mode.REJECT, actor="ana", reason="incident")
    assert heard == [("create_ticket", Mode.REJECT)]
    heard.clear()
    modes.set_mode(GLOBAL, Mode.OBSERVE, actor="ana", reason="everything observes")
    assert sorted(heard) == [("create_ticket", Mode.OBSERVE), ("refund_order", Mode.OBSERVE)]
    heard.clear()
    modes.rebind(parse_policy(b"tools: {refund_order: {mode: reject}, new_tool: {}}\n", "/p.yaml"))
    assert heard == [("new_tool", Mode.OBSERVE)]  # refund_order is still forced to observe: unchanged
    heard.clear()
    modes.set_mode(GLOBAL, None, actor="ana", reason="over")
    assert heard == [("refund_order", Mode.REJECT)]


def test_another_replicas_changes_adopted_are_journalled_and_a_restart_reads_them(tmp_path) -> None:
    """In a fleet, most changes are another replica's: adopted, their entries are appended to the journal (an
    append, no whole rewrite), and a restart reads the fleet's document back."""
    clock = Clock()
    mine = store(tmp_path, clock)
    mine.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-4")
    other = ModeStore(POLICY, clock=clock)  # another replica, holding what this one held, then changing it
    other.adopt(mine.document)
    for number in range(5):
        clock.now += 60
        other.set_mode(
            "create_ticket", Mode.REJECT if number % 2 == 0 else Mode.OBSERVE, actor="bo", reason=f"{number}"
        )
    path = tmp_path / "modes.json"
    journal_before = path.read_bytes()
    mine.adopt(other.document)
    assert path.read_bytes().startswith(journal_before)  # appended to, not rewritten
    assert mine.document == other.document
    again = store(tmp_path, clock)
    assert again.document == other.document
    assert again.mode_for("create_ticket") is Mode.REJECT and again.mode_for("refund_order") is Mode.OBSERVE
