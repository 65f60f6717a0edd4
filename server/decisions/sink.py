"""What the Validator hands a verdict to: the decision log, or a no-op when there is none."""

from __future__ import annotations

from typing import Protocol

from argwatch.server.decisions.value_plan import ValuePlan
from argwatch.server.modes.document import ModeDocument
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall


class DecisionSink(Protocol):
    """Takes one decided call. Never blocks and never raises: the call is already judged."""

    enabled: bool

    def offer(
        self, at_ns: int, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency_ns: int, plan: ValuePlan
    ) -> None:
        """`at_ns`: when the call came, epoch nanoseconds; `latency_ns`: the verdict's own time."""


class NoDecisionLog:
    """No decision log: the Validator skips even timing the call (`enabled` is False)."""

    enabled = False

    def offer(
        self, at_ns: int, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency_ns: int, plan: ValuePlan
    ) -> None:
        return None
