"""The count model: a tool's figures sum its arguments', cohorts stay apart, and a series at zero is still a row."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from argwatch.server.telemetry.counts import ArgumentCounts, CheckKind, Count, CountKey, fold
from argwatch.server.telemetry.metrics import GatewayMetrics


def test_a_tool_row_sums_its_arguments_and_cohorts_stay_apart() -> None:
    table = fold(
        {
            CountKey("refund", "", Count.CALLS): 10,
            CountKey("refund", "", Count.REJECTED): 3,
            CountKey("refund", "reason", Count.CHECKS, check=CheckKind.VALUE_SET): 10,
            CountKey("refund", "reason", Count.OUT_OF_SET, check=CheckKind.VALUE_SET): 4,
            CountKey("refund", "reason", Count.PROBLEM, "NOT_IN_SET", CheckKind.ANY): 4,
            CountKey("refund", "_call", Count.PROBLEM, "MISSING_REQUIRED", CheckKind.ANY): 1,
            CountKey("refund", "reason", Count.SHAPE, "case", CheckKind.VALUE_SET): 3,
            CountKey("refund", "reason", Count.CHECKS, check=CheckKind.VALUE_SET, cohort=("gpt", "v1")): 6,
            CountKey("refund", "amount", Count.CHECKS, check=CheckKind.VALUE_SET): 0,
        }
    )
    tool = table.tool("refund")
    assert (tool.calls, tool.rejected, tool.checks, tool.out_of_set) == (10, 3, 10, 4)
    assert tool.problems == {"NOT_IN_SET": 4, "MISSING_REQUIRED": 1}
    assert table.argument("refund", "reason") == ArgumentCounts(
        checks=10, out_of_set=4, problems={"NOT_IN_SET": 4}, shapes={"case": 3}
    )
    assert table.argument("refund", "reason").out_of_set_rate == 0.4
    assert table.cohorts[("refund", "reason")] == {("gpt", "v1"): ArgumentCounts(checks=6)}
    assert ("refund", "amount") in table.arguments  # a series at zero is a row
    assert table.tool("never_called").calls == 0


def test_the_metrics_read_back_through_the_model_as_prometheus_counts_them() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    meters = metrics.for_tool("refund", [("reason", "refunds.reasons")])
    meters.value_checks["reason", False, True].inc(2)  # out of set as written, in it normalised
    meters.value_checks["reason", True, True].inc(5)
    metrics.problem("refund", "reason", "NOT_IN_SET")
    metrics.failed_open("refund", "reason", "refunds.reasons")
    table = fold(metrics.counts())
    reason = table.argument("refund", "reason")
    assert (reason.checks, reason.out_of_set, reason.out_of_set_normalised) == (7, 2, 0)
    assert (reason.problems, reason.failed_open) == ({"NOT_IN_SET": 1}, 1)
    metrics.check_stale("refund", "refunds.reasons")
    totals = fold(metrics.counts()).tools["refund"]
    assert (totals.unavailable, totals.stale_checks) == (1, 1)
