"""The count feed reads what the full fold reads, through counts, removals and series made again; its windows too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from argwatch.server.policy.model import Mode
from argwatch.server.telemetry.count_windows import FINE_SECONDS, CountWindows
from argwatch.server.telemetry.counts import CountKey
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.verdict.decision import Decision

TOOLS = ("refund", "lookup", "cancel")
SETS = {"refund": [("reason", "reasons")], "lookup": [("region", "regions")], "cancel": []}

# One step: (what, tool, amount).
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["meters", "value", "problem", "decided", "failed_open", "stale", "cohort", "forget", "read"]),
        st.sampled_from(TOOLS),
        st.integers(min_value=1, max_value=5),
    ),
    max_size=40,
)


def apply(metrics: GatewayMetrics, what: str, tool: str, amount: int) -> None:
    bindings = SETS[tool]
    if what == "meters":
        metrics.for_tool(tool, bindings)
    elif what == "value" and bindings:
        metrics.for_tool(tool, bindings).value_checks[bindings[0][0], amount % 2 == 0, amount % 3 != 0].inc(amount)
    elif what == "problem":
        metrics.problem(tool, "reason" if amount % 2 else "", "NOT_IN_SET")
    elif what == "decided":
        metrics.for_tool(tool, bindings).decided(Mode.REJECT if amount % 2 else Mode.OBSERVE, Decision.REJECT)
    elif what == "failed_open" and bindings:
        metrics.failed_open(tool, bindings[0][0], bindings[0][1])
    elif what == "stale" and bindings:
        metrics.check_stale(tool, bindings[0][1])
    elif what == "cohort":
        metrics.value_checks_by_model.labels(tool, "reason", "gpt", "v1", "false", "true").inc(amount)
    elif what == "forget":
        metrics.forget(tools=[tool])
        metrics.keep_tool_meters([])


def full_fold_agrees(metrics: GatewayMetrics, fed: dict[CountKey, int]) -> None:
    full = metrics.counts()
    assert {key: fed[key] for key in full} == full  # every key the full fold has, at the same count
    assert all(fed[key] == 0 for key in fed.keys() - full.keys())  # a key with no series left reads 0


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_the_feed_reads_what_the_full_fold_reads(steps: list[tuple[str, str, int]]) -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    fed: dict[CountKey, int] = {}
    for what, tool, amount in steps:
        apply(metrics, what, tool, amount)
        if what == "read":
            fed.update(metrics.count_changes())
            full_fold_agrees(metrics, fed)
    fed.update(metrics.count_changes())
    full_fold_agrees(metrics, fed)


def test_a_read_reports_only_what_moved() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    meters = {tool: metrics.for_tool(tool, SETS[tool]) for tool in TOOLS}
    first = metrics.count_changes()
    assert first == metrics.counts()  # the first read: every key, zeros too (a series at zero is a figure)
    assert metrics.count_changes() == {}
    meters["refund"].value_checks["reason", False, True].inc(3)
    assert {(key.tool, key.argument, key.what.value): value for key, value in metrics.count_changes().items()} == {
        ("refund", "reason", "checks"): 3,
        ("refund", "reason", "out_of_set"): 3,
    }


def test_a_series_removed_and_made_again_counts_from_zero() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    metrics.for_tool("refund", SETS["refund"]).value_checks["reason", True, True].inc(7)
    checks = next(key for key in metrics.counts() if key.tool == "refund" and key.what == "checks")
    assert metrics.count_changes()[checks] == 7
    metrics.forget(tools=["refund"])
    metrics.keep_tool_meters([])
    metrics.for_tool("refund", SETS["refund"]).value_checks["reason", True, True].inc(2)
    assert metrics.count_changes()[checks] == 2  # the old series' 7 came off; the new one's 2 went on
    assert metrics.counts()[checks] == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_windows_over_the_feed_equal_windows_over_the_full_fold(steps: list[tuple[str, str, int]]) -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    clock = Clock()
    full = CountWindows(metrics.counts, clock)
    fed = CountWindows(metrics.count_changes, clock, changes_only=True)
    for what, tool, amount in steps:
        apply(metrics, what, tool, amount)
        if what == "read":
            clock.now += FINE_SECONDS
            full.sample()
            fed.sample()
    for seconds in (60, 900, 0):
        full_counts, full_covered = full.window(seconds)
        fed_counts, fed_covered = fed.window(seconds)
        assert fed_covered == full_covered
        assert {key: value for key, value in fed_counts.items() if value} == full_counts
