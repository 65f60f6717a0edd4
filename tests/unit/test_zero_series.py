"""Issue 19: zero is a figure. Every series the policy can name exists at 0 from start-up, so the shipped
Grafana panels and alerts read 0 rather than "No data" before the first failed-open check, abandoned repair
or repeat (the fail-open, abandoned-repair and repeat panels were empty until something happened)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.verdict.repeats import OperationOutcome, Retry


def test_every_series_a_tool_can_name_exists_at_zero_before_any_call() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    metrics.for_tool("refund_order", [("reason_code", "refunds.reason_codes")], side_effect=True)
    metrics.for_tool("create_ticket", [("assignee", "identity.active_handles")])

    def at_zero(name: str, **labels: str) -> bool:
        return registry.get_sample_value(name, labels) == 0.0

    for tool, value_set in (("refund_order", "refunds.reason_codes"), ("create_ticket", "identity.active_handles")):
        assert at_zero("tool_argument_check_unavailable_total", tool=tool, set=value_set)  # fail-open panel
        assert at_zero("tool_argument_check_stale_total", tool=tool, set=value_set)
        assert at_zero("argwatch_stale_downgrades_total", tool=tool, set=value_set)
        assert at_zero("tool_argument_repair_abandoned_total", tool=tool)  # abandoned-repair panel
        assert at_zero("tool_argument_repair_succeeded_total", tool=tool)
        assert at_zero("tool_argument_repair_attempts_count", tool=tool)
        assert at_zero("argwatch_calls_with_problems_total", tool=tool, invented="true")  # the blast radius
        assert at_zero("argwatch_calls_with_problems_total", tool=tool, invented="false")
    assert at_zero("tool_call_repeat_total", tool="refund_order")  # repeat panel, for a tool with side effects
    assert at_zero("argwatch_repeat_check_degraded_total", tool="refund_order")
    for retry in (r for r in Retry if r.value):  # Retry.NO is not a reason
        assert at_zero("argwatch_repeat_retries_total", tool="refund_order", reason=retry.value)
    for outcome in (OperationOutcome.SUCCEEDED, OperationOutcome.FAILED, OperationOutcome.UNKNOWN):
        assert at_zero("argwatch_outcome_reports_total", tool="refund_order", outcome=outcome.value)
    assert registry.get_sample_value("tool_call_repeat_total", {"tool": "create_ticket"}) is None  # no side effects
