"""What `argwatch mode` prints, from Admin API messages alone: who set each override in force (from the
audit), and what a change will do, including where the global override hides a tool's own."""

from __future__ import annotations

import pytest

from argwatch.server.cli import mode_view
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb


def change(tool: str, outcome: str, new: str = "observe", actor: str = "ana") -> admin_pb2.ModeChange:
    return admin_pb2.ModeChange(tool=tool, outcome=outcome, new_mode=new, actor=actor, reason="INC-7")


def status(global_mode: pb.Mode = pb.MODE_UNSPECIFIED, **sources: str) -> admin_pb2.GetStatusResponse:
    forced = global_mode != pb.MODE_UNSPECIFIED
    found = admin_pb2.GetStatusResponse(policy_version="abc", global_mode=global_mode, mode_store="memory")
    for tool, source in sources.items():
        mode = global_mode if forced else pb.MODE_OBSERVE if source == "override" else pb.MODE_REJECT
        found.tools.add(tool=tool, mode=mode, mode_source=source, policy_mode=pb.MODE_REJECT)
    found.tools.add(tool="_unknown")  # calls to tools the policy lacks: no mode to list or change
    return found


def test_the_override_in_force_is_the_newest_entry_that_applied_one() -> None:
    """A refusal after it changes nothing; a clear or an expiry after it means there is none."""
    changes = [  # newest first
        change("refund_order", "refused: permission_denied", actor="grafana"),
        change("refund_order", "applied", actor="ana"),
        change("create_ticket", "expired"),
        change("create_ticket", "applied"),
        change("", "applied", new="reject", actor="bo"),
    ]
    assert {tool: c.actor for tool, c in mode_view.setters(changes).items()} == {"refund_order": "ana", "": "bo"}


def test_the_list_names_each_source_and_who_set_an_override() -> None:
    lines = mode_view.render_list(
        status(refund_order="override", create_ticket="policy"), [change("refund_order", "applied")]
    )
    assert lines[1] == "global override: none"
    assert lines[3].split() == ["refund_order", "observe", "override", "reject", "never", "ana", "INC-7"]
    assert lines[4].split() == ["create_ticket", "reject", "policy", "reject", "-", "-", "-"]
    assert not any(line.startswith("_unknown") for line in lines)


def test_a_tool_s_change_under_the_global_override_says_the_global_one_stays() -> None:
    shown = mode_view.plan(status(pb.MODE_OBSERVE, refund_order="global"), [], "refund_order", "reject", 0)
    assert not shown.nothing
    assert "the global override (observe) stays in force: refund_order runs in observe" in shown.lines[1]


def test_clearing_the_global_override_names_where_each_tool_goes_back_to() -> None:
    changes = [change("", "applied", new="observe"), change("refund_order", "applied", new="observe")]
    shown = mode_view.plan(
        status(pb.MODE_OBSERVE, refund_order="global", create_ticket="global"), changes, mode_view.GLOBAL, None, 0
    )
    assert shown.lines[1].strip() == "refund_order observe (override), create_ticket reject (policy)"


def test_nothing_to_clear_is_nothing_to_change() -> None:
    assert mode_view.plan(status(refund_order="policy"), [], "refund_order", None, 0).nothing
    assert mode_view.plan(status(refund_order="policy"), [], mode_view.GLOBAL, None, 0).nothing


def test_an_unknown_tool_lists_the_policy_s_tools() -> None:
    with pytest.raises(mode_view.UnknownTool, match=r"no tool 'refund' \(its tools: refund_order\)"):
        mode_view.plan(status(refund_order="policy"), [], "refund", "observe", 0)
