"""A value per tool worked out on first use: only for the policy's tools, whatever name a caller sends."""

from __future__ import annotations

import pytest

from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import ToolPolicy
from argwatch.server.verdict.per_tool import PerTool

POLICY = parse_policy(b"tools: {refund_order: {mode: reject}, create_ticket: {}}\n", "/p.yaml")


def test_each_tool_is_worked_out_once_when_first_asked_for() -> None:
    made: list[str] = []

    def make(tool: ToolPolicy) -> str:
        made.append(tool.name)
        return tool.mode.value

    per_tool = PerTool(POLICY.tools, make)
    assert made == []
    assert per_tool["refund_order"] == "reject" and per_tool.get("refund_order") == "reject"
    assert per_tool.get("create_ticket") == "observe"
    assert made == ["refund_order", "create_ticket"]


def test_a_name_the_policy_lacks_adds_nothing() -> None:
    per_tool = PerTool(POLICY.tools, lambda tool: tool.name)
    assert per_tool.get("no_such_tool") is None
    assert per_tool.get("no_such_tool", "default") == "default"
    with pytest.raises(KeyError):
        per_tool["another"]
    assert len(per_tool) == 0
