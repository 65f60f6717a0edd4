"""Prometheus metrics, on an injected registry, with label values only ever taken from the policy.

Callers pass label values that come from the policy (tool, argument and set
names) or from fixed vocabularies (codes, modes, decisions); the gateway maps a
tool the policy does not know to UNKNOWN_LABEL before it gets here, so a model
inventing tool names adds no series. Children are memoised per label tuple:
`.labels()` costs ~1.8 us a call here, a dictionary look-up ~0.1 us.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from argwatch.server.policy.model import NO_COHORT, OTHER_COHORT, Mode
from argwatch.server.verdict.decision import Decision

UNKNOWN_LABEL = "_unknown"
CALL_LEVEL_ARGUMENT = "_call"  # the argument label of problems about the whole call
COHORT_PREFIX = "cohort\x1f"  # window_counts' keys of the value checks split by model and prompt version


def cohort_what(model: str, version: str, kind: str) -> str:
    """window_counts' `what` for one model and prompt version's count of `kind` (checks, out_of_set, ...)."""
    return f"{COHORT_PREFIX}{model}\x1f{version}\x1f{kind}"


def parse_cohort_what(what: str) -> tuple[str, str, str] | None:
    """(model, prompt version, kind) of a cohort_what key; None for any other key."""
    if not what.startswith(COHORT_PREFIX):
        return None
    model, version, kind = what[len(COHORT_PREFIX) :].split("\x1f")
    return model, version, kind


@dataclass(frozen=True, slots=True)
class ToolTotals:
    """Counts for one tool since start, read back from the counters (for the Admin API)."""

    calls: int = 0
    allowed: int = 0
    rejected: int = 0
    value_checks: int = 0
    out_of_set: int = 0
    out_of_set_normalised: int = 0
    unavailable: int = 0
    repeats: int = 0


class ValueSetHealth(NamedTuple):
    """One set's health at scrape time."""

    name: str
    age_seconds: float  # inf when never loaded
    stale: bool
    available: bool
    version: int = -1  # -1 when never loaded


class _ValueSetHealthCollector(Collector):
    """argwatch_value_set_{age_seconds,stale,available,version}, computed at scrape time from the provider's state."""

    def __init__(self) -> None:
        self._sources: list[Callable[[], Iterable[ValueSetHealth]]] = []

    def replace(self, source: Callable[[], Iterable[ValueSetHealth]]) -> None:
        self._sources = [source]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "argwatch_value_set_age_seconds",
            "Seconds since the value set's source last confirmed the copy in use (+Inf: never loaded).",
            labels=["set"],
        )
        stale = GaugeMetricFamily(
            "argwatch_value_set_stale",
            "1 while the copy in use is stale: its source is down or has not confirmed it within the TTL.",
            labels=["set"],
        )
        available = GaugeMetricFamily(
            "argwatch_value_set_available",
            "1 while the set can be checked against; 0 when never loaded or older than max_staleness.",
            labels=["set"],
        )
        version = GaugeMetricFamily(
            "argwatch_value_set_version",
            "The version of the value set's copy in use (-1: never loaded); replicas should agree.",
            labels=["set"],
        )
        for source in self._sources:
            for health in source():
                version.add_metric([health.name], float(health.version))
                age.add_metric([health.name], health.age_seconds)
                stale.add_metric([health.name], 1.0 if health.stale else 0.0)
                available.add_metric([health.name], 1.0 if health.available else 0.0)
        yield age
        yield stale
        yield available
        yield version


class _Tally:
    """A counter child for the hot path: an int bumped on the event loop thread, read at scrape time.

    prometheus_client's child costs ~0.8 us an inc (a lock, checks); this ~0.1 us.
    Only the event loop thread increments; a scrape reads whole ints.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, amount: int = 1) -> None:
        self.value += amount


class _TallyFamily(Collector):
    """A counter family (name_total) of _Tally children, keyed by label values."""

    def __init__(self, name: str, documentation: str, labelnames: list[str], registry: CollectorRegistry) -> None:
        self._name, self._documentation, self._labelnames = name, documentation, labelnames
        self._children: dict[tuple[str, ...], _Tally] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Tally:
        return self._children.setdefault(values, _Tally())

    def remove(self, *values: str) -> None:
        self._children.pop(values, None)

    def children(self) -> list[tuple[tuple[str, ...], _Tally]]:
        return list(self._children.items())

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, tally in list(self._children.items()):
            family.add_metric(list(values), tally.value)
        yield family

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)


class _TallyHistogram(Collector):
    """A label-less histogram for the hot path: a bisect and two adds an observation (~0.2 us), where
    prometheus_client's Histogram takes a lock per observation. Only the event loop thread observes."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry) -> None:
        self._name, self._documentation = name, documentation
        self._bounds = tuple(sorted(buckets))
        self._counts = [0] * (len(self._bounds) + 1)  # the last: above every bound
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, buckets = 0, []
        for bound, count in zip((*self._bounds, float("inf")), list(self._counts), strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(self._name, self._documentation, buckets=buckets, sum_value=self._sum)

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self._name, self._documentation)


class _CallbackCounter(Collector):
    """A counter whose value is read from a callable at scrape time."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self._name, self._documentation, self._read = name, documentation, read

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._read())


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
        allow = decision is Decision.ALLOW
        if mode is Mode.OBSERVE:
            (self._observe_allow if allow else self._observe_reject).inc()
        else:
            (self._reject_allow if allow else self._reject_reject).inc()


class GatewayMetrics:
    """Every metric the gateway exports, registered on `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        # The two families counted on every call are tallies (see _Tally); the rest are
        # prometheus_client counters.
        self.value_checks = _TallyFamily(
            "tool_argument_value_check",
            "Values compared with their value set, by whether they were in it as written and after normalisation.",
            ["tool", "argument", "set", "in_set", "in_set_normalised"],
            registry,
        )
        self.problems = _TallyFamily(
            "tool_argument_problems",
            "Problems found in tool-call arguments, by code.",
            ["tool", "argument", "code"],
            registry,
        )
        # The same value checks split by who wrote the call, only where the policy declares models: the label
        # values are the policy's names, "_other" or "_none" (policy.model.CohortConfig), never as sent.
        self.value_checks_by_model = _TallyFamily(
            "tool_argument_value_check_by_model",
            "Values compared with their value set, by the model and prompt version that wrote the call (as the "
            "policy declares them; _other, _none) and whether they were in it as written and after normalisation.",
            ["tool", "argument", "model", "prompt_version", "in_set", "in_set_normalised"],
            registry,
        )
        self.unavailable = _TallyFamily(
            "tool_argument_check_unavailable",
            "Checks not carried out because the value set could not be read (failed open or closed).",
            ["tool", "set"],
            registry,
        )
        self.repair_started = _TallyFamily(
            "tool_argument_repair_started",
            "Calls rejected, each of which starts a repair by the model.",
            ["tool"],
            registry,
        )
        self.mismatch_shapes = _TallyFamily(
            "tool_argument_mismatch_shape",
            "Out-of-set values by why they missed: case, separator, retired, invented.",
            ["tool", "argument", "shape"],
            registry,
        )
        self.repair_succeeded_total = _TallyFamily(
            "tool_argument_repair_succeeded",
            "Repairs that worked: after a rejection, a later call of the same tool in the same conversation passed.",
            ["tool"],
            registry,
        )
        self.repair_abandoned_total = _TallyFamily(
            "tool_argument_repair_abandoned",
            "Repairs never completed: no passing call of the tool in the conversation within repair.remember.",
            ["tool"],
            registry,
        )
        self.repair_attempts = Histogram(
            "tool_argument_repair_attempts",
            "Rejected attempts a successful repair took.",
            ["tool"],
            buckets=(1, 2, 3, 5, 8),
            registry=registry,
        )
        self.calls_with_problems = _TallyFamily(
            "argwatch_calls_with_problems",
            "Calls with at least one problem, whatever the mode: what reject mode refuses and observe mode lets "
            "through; `invented` says whether a value among them was invented (not a case or separator slip).",
            ["tool", "invented"],
            registry,
        )
        self.decisions = _TallyFamily(
            "argwatch_decisions",
            "Verdicts, by the mode applied and the decision.",
            ["tool", "mode", "decision"],
            registry,
        )
        self.mode = Gauge(
            "argwatch_mode",
            "The mode in force per tool: 0 observe, 1 reject.",
            ["tool"],
            registry=registry,
        )
        self.set_members = Gauge(
            "argwatch_value_set_members",
            "Members in the value set's snapshot in use.",
            ["set"],
            registry=registry,
        )
        self.set_refresh = Counter(
            "argwatch_value_set_refresh",
            "Fetches of a value set from its source, by result (ok, error).",
            ["set", "result"],
            registry=registry,
        )
        self.source_connected = Gauge(
            "argwatch_source_connected",
            "1 while the source is reachable (watch stream up, or last pull succeeded), else 0.",
            ["source"],
            registry=registry,
        )
        self.set_update_rejected = Counter(
            "argwatch_value_set_update_rejected",
            "Malformed updates from a source, rejected (the last good copy kept), by reason.",
            ["set", "reason"],
            registry=registry,
        )
        self.set_resync = Counter(
            "argwatch_value_set_resync",
            "Full re-fetches of a set, by reason (version_gap, unknown_base, behind, manual).",
            ["set", "reason"],
            registry=registry,
        )
        self.shared_cache_errors = Counter(
            "argwatch_shared_cache_errors",
            "Shared-cache operations that failed or timed out (the gateway went to the source instead).",
            ["operation"],
            registry=registry,
        )
        self.shared_cache_rejections = Counter(
            "argwatch_shared_cache_rejected",
            "Values read from Redis that argwatch did not write: ignored (not JSON, an unknown type, a wrong shape), "
            "or cut to the limits argwatch writes within (cut_to_limits).",
            ["reason"],
            registry=registry,
        )
        self.requests_refused = Counter(
            "argwatch_requests_refused",
            "Gateway requests refused with INVALID_ARGUMENT before any check: a field past its length limit.",
            ["field"],
            registry=registry,
        )
        self.rpcs_shed = Counter(
            "argwatch_rpcs_shed",
            "Gateway RPCs refused with RESOURCE_EXHAUSTED before any work, by the limit reached: rpcs "
            "(--max-concurrent-rpcs), streams (--max-streams) or streams_per_peer (--max-streams-per-peer).",
            ["limit"],
            registry=registry,
        )
        self.streams_open = Gauge(
            "argwatch_streams_open", "ValidateStream calls open now (at most --max-streams).", registry=registry
        )
        self.streams_idle_closed = Counter(
            "argwatch_streams_idle_closed",
            "ValidateStream calls the gateway closed after --stream-idle-seconds, by what they kept it waiting "
            "for: request (none came) or answer (the client did not take it: it stopped reading).",
            ["waiting"],
            registry=registry,
        )
        self.metrics_scrapes_refused = Counter(
            "argwatch_metrics_scrapes_refused",
            "Connections to the /metrics listener answered without the metrics, by why: busy (too many at once), "
            "slow (no request, or the answer not taken, in time) or bad_request.",
            ["why"],
            registry=registry,
        )
        self.table_evictions = Counter(
            "argwatch_table_evictions",
            "Entries dropped from a full in-memory table to keep it within its bound (a flood of distinct ids).",
            ["table"],
            registry=registry,
        )
        self.stale_checks = Counter(
            "tool_argument_check_stale",
            "Checks made against a stale copy of their value set (still checked, against the last good copy).",
            ["tool", "set"],
            registry=registry,
        )
        self.admin_refused = Counter(
            "argwatch_admin_refused",
            "Admin API calls refused: no or unknown token (unauthenticated), or a read-only token changing a mode.",
            ["method", "reason"],
            registry=registry,
        )
        self.rule_errors = Counter(
            "argwatch_rule_errors",
            "Rules that could not be evaluated (a missing field, a type mismatch): a check that did not run.",
            ["tool", "rule"],
            registry=registry,
        )
        self.stale_downgrades = Counter(
            "argwatch_stale_downgrades",
            "Calls judged in observe mode instead of reject because a set was stale and on_stale is observe.",
            ["tool", "set"],
            registry=registry,
        )
        self.validate_seconds = _TallyHistogram(
            "argwatch_validate_seconds",
            "Time to judge one call, from the request decoded to the response built (the gRPC transport not "
            "included): Validate and each ValidateStream message.",
            (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry,
        )
        self.mode_store = Gauge(
            "argwatch_mode_store_connected",
            "1 while the shared mode store (Redis) answers; 0 while this replica enforces the last modes it knew.",
            registry=registry,
        )
        self.repeats = _TallyFamily(
            "tool_call_repeat",
            "Calls of a tool with side effects that repeated an earlier call of the same operation within its "
            "window, its outcome success, unknown or never reported (refused in reject mode, let through in observe).",
            ["tool"],
            registry,
        )
        self.repeat_retries = Counter(
            "argwatch_repeat_retries",
            "Repeats let through as genuine retries, by reason: after_failure (the earlier call was reported "
            "failed) or after_status_check (the policy's status tool was called since).",
            ["tool", "reason"],
            registry=registry,
        )
        self.repeat_check_degraded = Counter(
            "argwatch_repeat_check_degraded",
            "Calls of a tool with side effects checked for repeats against this replica's calls only, because the "
            "shared cache (Redis) did not answer (failed open: a repeat on another replica is not caught).",
            ["tool"],
            registry=registry,
        )
        self.outcome_reports = Counter(
            "argwatch_outcome_reports",
            "ReportOutcome calls, by tool and the outcome reported (succeeded, failed, unknown).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.policy_version = Gauge(
            "argwatch_policy",
            "1 for the version of the policy this replica serves (a hash of its content); replicas on different "
            "versions are a fleet mid-deploy, or skew.",
            ["version"],
            registry=registry,
        )
        self.policy_reloads = Counter(
            "argwatch_policy_reloads",
            "Policy reloads (SIGHUP or Admin.ReloadPolicy), by result: reloaded, unchanged, refused (the policy in "
            "use kept serving).",
            ["result"],
            registry=registry,
        )
        self._health = _ValueSetHealthCollector()
        registry.register(self._health)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._failed_open: dict[tuple[str, str], int] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def for_tool(self, tool: str, bindings: Iterable[tuple[str, str]] = (), side_effect: bool = False) -> ToolMeters:
        """The hot-path children of a tool label and its (argument, set) bindings."""
        return ToolMeters(self, tool, bindings, side_effect)

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

    def window_counts(self) -> dict[tuple[str, str, str], float]:
        """Every cumulative count the Admin API's windows use: (tool, argument, what) -> count.

        Per argument: "checks", "out_of_set", "out_of_set_normalised", "shape:<shape>", "problem:<code>",
        "failed_open", and cohort_what(model, prompt version, "checks") (and the two out-of-set counts) where
        the policy declares models. Per tool (argument ""): "calls", "allow", "reject", "repair_started",
        "repair_succeeded", "repair_abandoned", "repeats", "with_problems", "with_invented".
        """
        counts: dict[tuple[str, str, str], float] = {}

        def add(key: tuple[str, str, str], amount: float) -> None:
            counts[key] = counts.get(key, 0.0) + amount

        for (tool, argument, _set, in_set, normalised), tally in self.value_checks.children():
            add((tool, argument, "checks"), tally.value)
            if in_set == "false":
                add((tool, argument, "out_of_set"), tally.value)
            if normalised == "false":
                add((tool, argument, "out_of_set_normalised"), tally.value)
        for (tool, _mode, decision), tally in self.decisions.children():
            add((tool, "", "calls"), tally.value)
            add((tool, "", decision), tally.value)
        for (tool, argument, model, version, in_set, normalised), tally in self.value_checks_by_model.children():
            add((tool, argument, cohort_what(model, version, "checks")), tally.value)
            if in_set == "false":
                add((tool, argument, cohort_what(model, version, "out_of_set")), tally.value)
            if normalised == "false":
                add((tool, argument, cohort_what(model, version, "out_of_set_normalised")), tally.value)
        for (tool, invented), tally in self.calls_with_problems.children():
            add((tool, "", "with_problems"), tally.value)
            if invented == "true":
                add((tool, "", "with_invented"), tally.value)
        for (tool, argument, shape), tally in self.mismatch_shapes.children():
            add((tool, argument, "shape:" + shape), tally.value)
        for (tool, argument, code), tally in self.problems.children():
            add((tool, argument, "problem:" + code), tally.value)
        for family, what in (
            (self.repair_started, "repair_started"),
            (self.repair_succeeded_total, "repair_succeeded"),
            (self.repair_abandoned_total, "repair_abandoned"),
            (self.repeats, "repeats"),
        ):
            for (tool,), tally in family.children():
                add((tool, "", what), tally.value)
        for (tool, argument), count in list(self._failed_open.items()):
            add((tool, argument, "failed_open"), count)
        return counts

    def forget_cohorts(self, models: frozenset[str], prompt_versions: frozenset[str]) -> None:
        """Drops the split series of models and prompt versions a reloaded policy no longer declares."""
        kept_models, kept_versions = {*models, OTHER_COHORT, NO_COHORT}, {*prompt_versions, OTHER_COHORT, NO_COHORT}
        for values, _tally in self.value_checks_by_model.children():
            if values[2] not in kept_models or values[3] not in kept_versions:
                self.value_checks_by_model.remove(*values)

    def repair_succeeded(self, tool: str, attempts: int) -> None:
        self._child(self.repair_succeeded_total, tool).inc()
        self._child(self.repair_attempts, tool).observe(attempts)

    def repair_abandoned(self, tool: str) -> None:
        self._child(self.repair_abandoned_total, tool).inc()

    def admin_call_refused(self, method: str, reason: str) -> None:
        self._child(self.admin_refused, method, reason).inc()

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

    def count_dropped_samples(self, read: Callable[[], float]) -> None:
        """Exports argwatch_sample_log_dropped_total, read from `read` at scrape time."""
        self.registry.register(
            _CallbackCounter(
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
        families = [v for v in vars(self).values() if isinstance(v, _TallyFamily | Counter | Gauge | Histogram)]
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

    def tool_totals(self) -> dict[str, ToolTotals]:
        """Per tool label, the totals since start, read back from the counters."""
        totals: dict[str, dict[str, float]] = {}

        def add(tool: str, field: str, value: float) -> None:
            totals.setdefault(tool, {}).setdefault(field, 0.0)
            totals[tool][field] += value

        # Read from the tallies directly: a Prometheus-style collect() of every series took ~15 ms
        # at 200 tools x 5 arguments, on the event loop.
        for (tool, _mode, decision), tally in self.decisions.children():
            add(tool, "calls", tally.value)
            add(tool, decision, tally.value)
        for (tool, _argument, _set, in_set, normalised), tally in self.value_checks.children():
            add(tool, "value_checks", tally.value)
            if in_set == "false":
                add(tool, "out_of_set", tally.value)
            if normalised == "false":
                add(tool, "out_of_set_normalised", tally.value)
        for (tool, _set), tally in self.unavailable.children():
            add(tool, "unavailable", tally.value)
        for (tool,), tally in self.repeats.children():
            add(tool, "repeats", tally.value)
        return {
            tool: ToolTotals(
                calls=int(fields.get("calls", 0)),
                allowed=int(fields.get("allow", 0)),
                rejected=int(fields.get("reject", 0)),
                value_checks=int(fields.get("value_checks", 0)),
                out_of_set=int(fields.get("out_of_set", 0)),
                out_of_set_normalised=int(fields.get("out_of_set_normalised", 0)),
                unavailable=int(fields.get("unavailable", 0)),
                repeats=int(fields.get("repeats", 0)),
            )
            for tool, fields in totals.items()
        }


def flag_label(value: bool) -> str:
    return "true" if value else "false"
