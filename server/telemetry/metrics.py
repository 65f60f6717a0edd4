"""Prometheus metrics, on an injected registry, with label values only ever taken from the policy.

Callers pass label values that come from the policy (tool, argument and set
names) or from fixed vocabularies (codes, modes, decisions); the gateway maps a
tool the policy does not know to UNKNOWN_LABEL before it gets here, so a model
inventing tool names adds no series. The metrics themselves are a table
(metric_table.py); children are memoised per label tuple, since `.labels()` is
far dearer than a dictionary look-up (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from argwatch.server.policy.model import NO_COHORT, OTHER_COHORT, Mode
from argwatch.server.telemetry.count_feed import CountFeed
from argwatch.server.telemetry.counts import CheckKind, Count, CountKey
from argwatch.server.telemetry.metric_table import METRICS, Kind
from argwatch.server.telemetry.tallies import (
    CallbackCounter,
    Tally,
    TallyFamily,
    TallyHistogram,
    ValueSetHealth,
    ValueSetHealthCollector,
)
from argwatch.server.verdict.decision import Decision

__all__ = ["CALL_LEVEL_ARGUMENT", "UNKNOWN_LABEL", "GatewayMetrics", "ToolMeters", "ValueSetHealth", "flag_label"]

UNKNOWN_LABEL = "_unknown"
CALL_LEVEL_ARGUMENT = "_call"  # the argument label of problems about the whole call
# An Enum member read from its class takes the slow path of a metaclass with __getattr__ (3.11); a global does not.
_ALLOW, _OBSERVE = Decision.ALLOW, Mode.OBSERVE


class ToolMeters:
    """One tool's hot-path metric children, resolved once, so recording a call is a dict look-up and an inc.

    Creating them up front also makes every series exist from start at 0, which
    is what Prometheus' rate() and the ratio alerts want.
    """

    def __init__(
        self, metrics: GatewayMetrics, tool: str, bindings: Iterable[tuple[str, str]], side_effect: bool = False
    ) -> None:
        bindings = list(bindings)
        self.tool = tool
        metrics.zero_series(tool, [value_set for _, value_set in bindings], side_effect)
        self.decisions = {
            (mode, decision): metrics.decisions.labels(tool, mode.value, decision.value)
            for mode in Mode
            for decision in Decision
        }
        # (argument, in_set, in_set_normalised): a value in the set as written is in it normalised too.
        self.value_checks = {
            (argument, in_set, normalised): metrics.value_checks.labels(
                tool, argument, value_set, flag_label(in_set), flag_label(normalised)
            )
            for argument, value_set in bindings
            for in_set, normalised in ((True, True), (False, True), (False, False))
        }
        # Every bound value in its set (verdict.set_checks.all_in_sets), in binding order.
        self.all_in_set = tuple(self.value_checks[argument, True, True] for argument, _ in bindings)
        self.repair_started = metrics.repair_started.labels(tool)
        self.with_problems = metrics.calls_with_problems.labels(tool, "false")
        self.with_invented = metrics.calls_with_problems.labels(tool, "true")
        # Chosen by identity in `decided`: hashing an Enum is a Python-level call, twice a call.
        self._observe_allow = self.decisions[Mode.OBSERVE, Decision.ALLOW]
        self._observe_reject = self.decisions[Mode.OBSERVE, Decision.REJECT]
        self._reject_allow = self.decisions[Mode.REJECT, Decision.ALLOW]
        self._reject_reject = self.decisions[Mode.REJECT, Decision.REJECT]

    def decided(self, mode: Mode, decision: Decision) -> None:
        allow = decision is _ALLOW
        if mode is _OBSERVE:
            (self._observe_allow if allow else self._observe_reject).inc()
        else:
            (self._reject_allow if allow else self._reject_reject).inc()

    def passed_tallies(self, mode: Mode) -> tuple[Tally, ...]:
        """What all_passed(mode) adds one to, in its order."""
        return ((self._observe_allow if mode is _OBSERVE else self._reject_allow), *self.all_in_set)

    def all_passed(self, mode: Mode) -> None:
        """An allowed call with every bound value in its set: `decided(mode, ALLOW)` and each `all_in_set`."""
        (self._observe_allow if mode is _OBSERVE else self._reject_allow).value += 1
        for counter in self.all_in_set:
            counter.value += 1  # Tally.inc's add, without a method call per counter


class GatewayMetrics:
    """Every metric the gateway exports (metric_table.METRICS), registered on `registry`."""

    value_checks: TallyFamily
    problems: TallyFamily
    value_checks_by_model: TallyFamily
    unavailable: TallyFamily
    repair_started: TallyFamily
    mismatch_shapes: TallyFamily
    repair_succeeded_total: TallyFamily
    repair_abandoned_total: TallyFamily
    repair_attempts: Histogram
    calls_with_problems: TallyFamily
    decisions: TallyFamily
    mode: Gauge
    set_members: Gauge
    set_refresh: Counter
    decision_log_dropped: Counter
    source_connected: Gauge
    set_update_rejected: Counter
    set_resync: Counter
    shared_cache_errors: Counter
    shared_cache_rejections: Counter
    requests_refused: Counter
    rpcs_shed: Counter
    streams_open: Gauge
    streams_idle_closed: Counter
    metrics_scrapes_refused: Counter
    table_evictions: Counter
    stale_checks: TallyFamily
    admin_refused: Counter
    rule_errors: Counter
    elements_unchecked: Counter
    stale_downgrades: Counter
    validate_seconds: TallyHistogram
    mode_store: Gauge
    repeats: TallyFamily
    repeat_retries: Counter
    repeat_check_degraded: Counter
    outcome_reports: Counter
    policy_version: Gauge
    policy_reloads: Counter
    shadow_calls: Counter
    shadow_differences: Counter
    shadow_failures: Counter
    shadow_policy: Gauge

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._folds: list[tuple[TallyFamily | Counter, Callable[[tuple[str, ...]], Iterable[CountKey]]]] = []
        for spec in METRICS:
            family: Any
            if spec.kind is Kind.TALLY:
                family = TallyFamily(spec.name, spec.documentation, list(spec.labels), registry)
            elif spec.kind is Kind.TALLY_HISTOGRAM:
                family = TallyHistogram(spec.name, spec.documentation, spec.buckets, registry)
            elif spec.kind is Kind.HISTOGRAM:
                family = Histogram(spec.name, spec.documentation, spec.labels, buckets=spec.buckets, registry=registry)
            else:
                kind = Counter if spec.kind is Kind.COUNTER else Gauge
                family = kind(spec.name, spec.documentation, spec.labels, registry=registry)
            setattr(self, spec.attribute, family)
            if spec.counts is not None:
                if spec.kind not in (Kind.TALLY, Kind.COUNTER):
                    raise ValueError(f"{spec.name}: only a counter can feed the count model")
                self._folds.append((family, spec.counts))
        self._health = ValueSetHealthCollector()
        registry.register(self._health)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._tool_meters: dict[tuple[str, tuple[tuple[str, str], ...], bool], ToolMeters] = {}
        self._failed_open: dict[tuple[str, str], int] = {}
        self._keys_of: dict[tuple[int, tuple[str, ...]], tuple[CountKey, ...]] = {}
        self._feed = CountFeed(
            self._folds, _series_of, (lambda: iter(list(self._failed_open.items())), _failed_open_keys)
        )

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def for_tool(self, tool: str, bindings: Iterable[tuple[str, str]] = (), side_effect: bool = False) -> ToolMeters:
        """The hot-path children of a tool label and its (argument, set) bindings: the same ones again for the
        same tool, bindings and side effect (a reload of 10,000 tools made them all anew, on the event loop)."""
        key = (tool, tuple(bindings), side_effect)
        meters = self._tool_meters.get(key)
        if meters is None:
            meters = self._tool_meters[key] = ToolMeters(self, tool, key[1], side_effect)
        return meters

    def keep_tool_meters(self, keep: Iterable[ToolMeters]) -> None:
        """Forgets every tool's children but these (the policy a reload built): a tool it removed, whose series
        forget() then drops, is never handed its old children again."""
        kept = {id(meters) for meters in keep}
        self._tool_meters = {key: meters for key, meters in self._tool_meters.items() if id(meters) in kept}

    def zero_series(self, tool: str, value_sets: Iterable[str], side_effect: bool) -> None:
        """Zero is a figure: every series the policy can name exists from start, so a Grafana panel or an
        alert reads 0, not "No data", before the first failed-open check, abandoned repair or repeat."""
        self.repair_succeeded_total.labels(tool)
        self.repair_abandoned_total.labels(tool)
        self._child(self.repair_attempts, tool)
        for value_set in value_sets:
            self.unavailable.labels(tool, value_set)
            self._child(self.stale_checks, tool, value_set)
            self._child(self.stale_downgrades, tool, value_set)
        if side_effect:
            self.repeats.labels(tool)
            self._child(self.repeat_check_degraded, tool)
            for reason in ("after_failure", "after_status_check"):
                self._child(self.repeat_retries, tool, reason)
            for outcome in ("succeeded", "failed", "unknown"):
                self._child(self.outcome_reports, tool, outcome)

    def problem(self, tool: str, argument: str, code: str) -> None:
        self._child(self.problems, tool, argument or CALL_LEVEL_ARGUMENT, code).inc()

    def check_unavailable(self, tool: str, value_set: str) -> None:
        self._child(self.unavailable, tool, value_set).inc()

    def mode_store_connected(self, up: bool) -> None:
        self.mode_store.set(1 if up else 0)

    def mode_in_force(self, tool: str, rejecting: bool) -> None:
        self._child(self.mode, tool).set(1 if rejecting else 0)

    def value_set_refreshed(self, name: str, members: int) -> None:
        self._child(self.set_refresh, name, "ok").inc()
        self._child(self.set_members, name).set(members)

    def value_set_refresh_failed(self, name: str) -> None:
        self._child(self.set_refresh, name, "error").inc()

    def value_set_update_rejected(self, name: str, reason: str) -> None:
        self._child(self.set_update_rejected, name, reason).inc()

    def value_set_resync(self, name: str, reason: str) -> None:
        self._child(self.set_resync, name, reason).inc()

    def source_connected_state(self, source: str, up: bool) -> None:
        self._child(self.source_connected, source).set(1 if up else 0)

    def shared_cache_error(self, operation: str) -> None:
        self._child(self.shared_cache_errors, operation).inc()

    def request_refused(self, field: str) -> None:
        self._child(self.requests_refused, field).inc()

    def stream_idle_closed(self, waiting: str) -> None:
        self._child(self.streams_idle_closed, waiting).inc()

    def rpc_shed(self, limit: str) -> None:
        self._child(self.rpcs_shed, limit).inc()

    def metrics_scrape_refused(self, why: str) -> None:
        self._child(self.metrics_scrapes_refused, why).inc()

    def table_eviction(self, table: str) -> None:
        self._child(self.table_evictions, table).inc()

    def shared_cache_rejected(self, reason: str) -> None:
        self._child(self.shared_cache_rejections, reason).inc()

    def check_stale(self, tool: str, value_set: str) -> None:
        self._child(self.stale_checks, tool, value_set).inc()

    def mismatch_shape(self, tool: str, argument: str, shape: str) -> None:
        self._child(self.mismatch_shapes, tool, argument, shape).inc()

    def failed_open(self, tool: str, argument: str, value_set: str) -> None:
        """A check of `argument` skipped (failed open); counted in check_unavailable and, per argument, for
        the Admin API's windows."""
        self._child(self.unavailable, tool, value_set).inc()
        key = (tool, argument)
        self._failed_open[key] = self._failed_open.get(key, 0) + 1

    def counts(self) -> dict[CountKey, int]:
        """Every cumulative count of the count model (counts.py), read from the tallies (metric_table's `counts`)
        and the per-argument fail-opens."""
        counts: dict[CountKey, int] = {}
        keys_of = self._keys_of
        for position, (family, folds) in enumerate(self._folds):
            for labels, value in _series_of(family):
                # A series' keys are built once: this runs every few seconds over every series.
                keys = keys_of.get((position, labels))
                if keys is None:
                    keys = keys_of[position, labels] = tuple(folds(labels))
                for key in keys:  # zeros too: a series that exists is a figure (zero_series)
                    counts[key] = counts.get(key, 0) + value
        for (tool, argument), count in list(self._failed_open.items()):
            for key in _failed_open_keys((tool, argument)):
                counts[key] = counts.get(key, 0) + count
        return counts

    def count_changes(self) -> Mapping[CountKey, int]:
        """The counts of `counts()` that changed since the last call, with their values now (every one, the first
        time): what the count windows read every few seconds, at a cost of the traffic since, not of the
        catalogue (count_feed.py). A key whose last series was removed reads 0 here, and is left out of counts()."""
        return self._feed.changes()

    def forget_cohorts(self, models: frozenset[str], prompt_versions: frozenset[str]) -> None:
        """Drops the split series of models and prompt versions a reloaded policy no longer declares."""
        kept_models, kept_versions = {*models, OTHER_COHORT, NO_COHORT}, {*prompt_versions, OTHER_COHORT, NO_COHORT}
        for values, _tally in self.value_checks_by_model.children():
            if values[2] not in kept_models or values[3] not in kept_versions:
                self.value_checks_by_model.remove(*values)
        self._keys_of.clear()

    def repair_succeeded(self, tool: str, attempts: int) -> None:
        self._child(self.repair_succeeded_total, tool).inc()
        self._child(self.repair_attempts, tool).observe(attempts)

    def repair_abandoned(self, tool: str) -> None:
        self._child(self.repair_abandoned_total, tool).inc()

    def admin_call_refused(self, method: str, reason: str) -> None:
        self._child(self.admin_refused, method, reason).inc()

    def elements_not_checked(self, tool: str, argument: str, count: int) -> None:
        self._child(self.elements_unchecked, tool, argument).inc(count)

    def rule_error(self, tool: str, rule: str) -> None:
        self._child(self.rule_errors, tool, rule).inc()

    def stale_downgrade(self, tool: str, value_set: str) -> None:
        self._child(self.stale_downgrades, tool, value_set).inc()

    def repeat(self, tool: str) -> None:
        self._child(self.repeats, tool).inc()

    def repeat_retry(self, tool: str, reason: str) -> None:
        self._child(self.repeat_retries, tool, reason).inc()

    def repeat_check_local_only(self, tool: str) -> None:
        self._child(self.repeat_check_degraded, tool).inc()

    def outcome_reported(self, tool: str, outcome: str) -> None:
        self._child(self.outcome_reports, tool, outcome).inc()

    def decision_log_drops(self, reasons: Iterable[str]) -> Callable[[str], None]:
        """Counts a decision-log line dropped for `reason`; every reason's series exists from the start at 0.
        The children are resolved here: a drop under overload costs one increment (prometheus_client's
        counters are thread-safe, and the writer's thread counts write errors)."""
        children = {reason: self.decision_log_dropped.labels(reason) for reason in reasons}

        def dropped(reason: str) -> None:
            children[reason].inc()

        return dropped

    def count_dropped_samples(self, read: Callable[[], float]) -> None:
        """Exports argwatch_sample_log_dropped_total, read from `read` at scrape time."""
        self.registry.register(
            CallbackCounter(
                "argwatch_sample_log_dropped",
                "Sampled offending values dropped because the sample log's writer fell behind.",
                read,
            )
        )

    def watch_value_sets(self, health: Callable[[], Iterable[ValueSetHealth]]) -> None:
        """Registers the callable giving every set's health, read at scrape time (a reload's provider
        replaces the one before it)."""
        self._health.replace(health)

    def policy_serving(self, version: str) -> None:
        """The version served now: the only series of argwatch_policy."""
        self.policy_version.clear()
        self.policy_version.labels(version).set(1)

    def policy_reloaded(self, result: str) -> None:
        self.policy_reloads.labels(result).inc()

    def forget(self, *, tools: Iterable[str] = (), sets: Iterable[str] = (), sources: Iterable[str] = ()) -> None:
        """Drops every series of these tools, sets and sources (removed by a policy reload): they stop, rather
        than staying at their last value forever (a removed source's argwatch_source_connected at 0 would
        keep ArgwatchSourceDisconnected firing). Series of what the policy still has are untouched."""
        tools, sets, sources = frozenset(tools), frozenset(sets), frozenset(sources)
        if not tools and not sets and not sources:
            return
        families = [v for v in vars(self).values() if isinstance(v, TallyFamily | Counter | Gauge | Histogram)]
        for family in families:
            doomed = set()
            for collected in family.collect():
                for sample in collected.samples:
                    labels = sample.labels
                    if labels.get("tool") in tools or labels.get("set") in sets or labels.get("source") in sources:
                        # A sample's labels are in the family's label order, then a histogram's "le".
                        doomed.add(tuple(value for name, value in sample.labels.items() if name != "le"))
            for values in doomed:
                family.remove(*values)
        self._children = {
            key: child
            for key, child in self._children.items()
            if not any(label in tools or label in sets or label in sources for label in key[1:])
        }
        self._keys_of.clear()


def _failed_open_keys(labels: tuple[str, str]) -> tuple[CountKey]:
    tool, argument = labels
    return (CountKey(tool, argument, Count.FAILED_OPEN, check=CheckKind.VALUE_SET),)


def _series_of(family: TallyFamily | Counter) -> Iterator[tuple[tuple[str, ...], int]]:
    """Each series' label values and count: a tally's read directly (the hot path's families, read every few
    seconds), a prometheus_client counter's through collect()."""
    if isinstance(family, TallyFamily):
        for labels, tally in family.children():
            yield labels, tally.value
        return
    for collected in family.collect():
        for sample in collected.samples:
            if sample.name.endswith("_total"):
                yield tuple(sample.labels.values()), int(sample.value)


def flag_label(value: bool) -> str:
    return "true" if value else "false"
