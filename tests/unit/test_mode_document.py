"""The mode document's functions are pure: a change gives a new document and its audit entry, and nothing else."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import GLOBAL, ModeDocument, OverrideRequest, PolicyModes, Target
from argwatch.server.policy.model import Mode

TOOLS = PolicyModes(
    MappingProxyType({"refund_order": Mode.REJECT, "create_ticket": Mode.OBSERVE}),
    Mode.OBSERVE,
    MappingProxyType({"refund_order": frozenset({"arg:reason_code", "record:order"}), "create_ticket": frozenset()}),
)
NOW = 1_800_000_000.0


def request(tool: str, mode: Mode | None, reason: str = "INC-1", expires_in: float | None = None) -> OverrideRequest:
    return OverrideRequest(Target(tool), mode, "ana", reason, expires_in)


def test_a_change_gives_a_new_document_and_leaves_the_old_one_as_it_was() -> None:
    before = ModeDocument()
    after, entry = doc.apply(before, request("refund_order", Mode.OBSERVE, expires_in=60), TOOLS, NOW)
    assert before == ModeDocument() and before.overrides == {}
    assert (after.version, entry.old, entry.new, entry.outcome, entry.expires_at) == (
        1,
        "reject",
        "observe",
        "applied",
        NOW + 60,
    )
    assert after.audit == (entry,) and doc.in_force(after, TOOLS)["refund_order"] is Mode.OBSERVE
    again, _ = doc.apply(before, request("refund_order", Mode.OBSERVE, expires_in=60), TOOLS, NOW)
    assert again == after  # the same inputs, the same document: no hidden state


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (request("refund", Mode.OBSERVE), "the policy has no tool 'refund'"),
        (request("refund_order", Mode.OBSERVE, reason=" "), "a reason is required"),
        (request("refund_order", Mode.OBSERVE, expires_in=-1), "the expiry must be in the future"),
        (
            OverrideRequest(Target("refund_order", "reason_code"), Mode.OBSERVE, "ana", "INC"),
            "refund_order has no check 'reason_code'; its checks: arg:reason_code, record:order",
        ),
        (OverrideRequest(Target(GLOBAL, "record:order"), Mode.OBSERVE, "ana", "INC"), "a failure override names a"),
    ],
)
def test_a_refused_change_is_audited_and_changes_no_mode(change: OverrideRequest, why: str) -> None:
    after, entry = doc.apply(ModeDocument(), change, TOOLS, NOW)
    assert entry.refused and why in entry.outcome
    assert after.overrides == {} and after.refused == (entry,) and after.version == 1


def test_the_global_override_wins_and_expiry_reverts_only_what_is_due() -> None:
    document, _ = doc.apply(ModeDocument(), request(GLOBAL, Mode.OBSERVE, expires_in=10), TOOLS, NOW)
    document, _ = doc.apply(document, request("create_ticket", Mode.REJECT, expires_in=100), TOOLS, NOW)
    assert set(doc.in_force(document, TOOLS).values()) == {Mode.OBSERVE}
    assert not doc.due(document, TOOLS, NOW + 5)
    expired, entries = doc.expire(document, TOOLS, NOW + 50)
    assert [(e.target, e.old, e.new, e.outcome) for e in entries] == [("", "observe", "", "expired")]
    assert doc.in_force(expired, TOOLS) == {"refund_order": Mode.REJECT, "create_ticket": Mode.REJECT}


def test_an_override_of_another_replicas_tool_is_kept_and_never_expired_here() -> None:
    foreign = ModeDocument(
        overrides=MappingProxyType({Target("new_tool"): doc.Override(Mode.REJECT, "bo", "INC-9", NOW, NOW + 1)})
    )
    kept, entries = doc.expire(foreign, TOOLS, NOW + 3600)
    assert entries == [] and kept is foreign


def test_the_json_form_reads_back_to_the_same_document_checks_included() -> None:
    document, _ = doc.apply(ModeDocument(), request("refund_order", Mode.OBSERVE, expires_in=60), TOOLS, NOW)
    below = doc.Override(Mode.OBSERVE, "ana", "fail open on orders", NOW)
    document = replace(document, overrides=MappingProxyType({**document.overrides, Target("t", "c"): below}))
    assert doc.from_json(doc.to_json(document)) == document
    with pytest.raises(TypeError, match="actor"):
        doc.from_json({"version": 1, "overrides": {"t": {"mode": "reject", "actor": 7, "reason": "", "set_at": 1}}})


def test_a_check_override_applies_where_the_policy_has_the_check_and_is_kept_where_it_does_not() -> None:
    change = OverrideRequest(Target("refund_order", "record:order"), Mode.OBSERVE, "ana", "INC-9", 600)
    document, entry = doc.apply(ModeDocument(), change, TOOLS, NOW)
    assert (entry.target, entry.check, entry.old, entry.new, entry.outcome) == (
        "refund_order",
        "record:order",
        "",
        "observe",
        "applied",
    )
    assert doc.checks_in_force(document, TOOLS) == {"refund_order": {"record:order": Mode.OBSERVE}}
    assert doc.in_force(document, TOOLS)["refund_order"] is Mode.REJECT  # the tool itself is unchanged
    # A replica whose policy lacks the check keeps the override (another replica enforces it) and applies none.
    older = PolicyModes(TOOLS.tools, TOOLS.default, MappingProxyType({"refund_order": frozenset({"arg:reason_code"})}))
    assert doc.checks_in_force(document, older) == {}
    assert not doc.due(document, older, NOW + 601) and doc.due(document, TOOLS, NOW + 601)
    assert doc.from_json(doc.to_json(document)) == document  # saved and read back, the check included
    expired, entries = doc.expire(document, TOOLS, NOW + 601)
    assert [(e.check, e.outcome) for e in entries] == [("record:order", "expired")] and not expired.overrides


def test_a_failure_override_names_no_tool_and_reads_its_mode_as_a_failure() -> None:
    from argwatch.server.policy.check_ids import record_failure, set_failure
    from argwatch.server.policy.model import Failure, RecordBinding, ValueSetConfig

    tools = PolicyModes(TOOLS.tools, TOOLS.default, TOOLS.checks, frozenset({"source:db", "set:codes"}))
    change = OverrideRequest(Target(GLOBAL, "source:db"), Mode.OBSERVE, "ana", "INC-9")
    document, entry = doc.apply(ModeDocument(), change, tools, NOW)
    assert (entry.target, entry.check, entry.new) == ("", "source:db", "open")
    overrides = doc.failures_in_force(document, tools)
    assert overrides == {"source:db": Failure.OPEN}
    assert doc.in_force(document, tools) == doc.in_force(ModeDocument(), tools)  # no tool's mode moved
    closed = ValueSetConfig("codes", "db", 60.0, Failure.CLOSED)
    assert set_failure(closed, overrides) is Failure.OPEN  # its source's override
    assert set_failure(closed, {**overrides, "set:codes": Failure.CLOSED}) is Failure.CLOSED  # the set's own first
    order = RecordBinding("order", "db", "order", "order_id", failure=Failure.CLOSED)
    assert record_failure(order, overrides) is Failure.OPEN
    assert record_failure(order, {"record_kind:order": Failure.CLOSED, **overrides}) is Failure.CLOSED
    _, entry = doc.apply(document, OverrideRequest(Target(GLOBAL, "source:nope"), Mode.OBSERVE, "a", "b"), tools, NOW)
    assert entry.refused and "the policy has no 'source:nope'" in entry.outcome
