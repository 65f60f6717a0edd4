"""Every metric the gateway exports, as one table: kind, name, help, labels, and what each series counts.

GatewayMetrics registers this table. A row with `counts` also feeds the typed
count model (counts.py): `counts` maps one series' label values to the counts
it adds to, so the Admin API's windows, the shape report and replay read every
figure the way Prometheus does. Adding a count: a Count member and field in
counts.py, and a row (or a `counts`) here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from argwatch.server.telemetry.counts import CheckKind, Count, CountKey


class Kind(enum.Enum):
    TALLY = "tally"  # a counter family of plain ints, for the hot path (tallies.TallyFamily)
    TALLY_HISTOGRAM = "tally_histogram"  # a label-less histogram for the hot path (tallies.TallyHistogram)
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


# What one series (its label values) adds to in the count model.
Folds = Callable[[tuple[str, ...]], Iterable[CountKey]]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    attribute: str  # GatewayMetrics' attribute holding the family
    kind: Kind
    name: str
    documentation: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    counts: Folds | None = None


def _value_checks(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, argument, _set, in_set, normalised = labels
    yield CountKey(tool, argument, Count.CHECKS, check=CheckKind.VALUE_SET)
    if in_set == "false":
        yield CountKey(tool, argument, Count.OUT_OF_SET, check=CheckKind.VALUE_SET)
    if normalised == "false":
        yield CountKey(tool, argument, Count.OUT_OF_SET_NORMALISED, check=CheckKind.VALUE_SET)


def _value_checks_by_model(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, argument, model, version, in_set, normalised = labels
    cohort = (model, version)
    yield CountKey(tool, argument, Count.CHECKS, check=CheckKind.VALUE_SET, cohort=cohort)
    if in_set == "false":
        yield CountKey(tool, argument, Count.OUT_OF_SET, check=CheckKind.VALUE_SET, cohort=cohort)
    if normalised == "false":
        yield CountKey(tool, argument, Count.OUT_OF_SET_NORMALISED, check=CheckKind.VALUE_SET, cohort=cohort)


def _problems(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, argument, code = labels
    yield CountKey(tool, argument, Count.PROBLEM, code, CheckKind.ANY)


def _shapes(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, argument, shape = labels
    yield CountKey(tool, argument, Count.SHAPE, shape, CheckKind.VALUE_SET)


def _decisions(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, _mode, decision = labels
    yield CountKey(tool, "", Count.CALLS)
    yield CountKey(tool, "", Count.ALLOWED if decision == "allow" else Count.REJECTED)


def _with_problems(labels: tuple[str, ...]) -> Iterable[CountKey]:
    tool, invented = labels
    yield CountKey(tool, "", Count.WITH_PROBLEMS)
    if invented == "true":
        yield CountKey(tool, "", Count.WITH_INVENTED)


def _per_tool(count: Count) -> Folds:
    def folds(labels: tuple[str, ...]) -> Iterable[CountKey]:
        yield CountKey(labels[0], "", count)

    return folds


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "value_checks",
        Kind.TALLY,
        "tool_argument_value_check",
        "Values compared with their value set, by whether they were in it as written and after normalisation.",
        labels=("tool", "argument", "set", "in_set", "in_set_normalised"),
        counts=_value_checks,
    ),
    MetricSpec(
        "problems",
        Kind.TALLY,
        "tool_argument_problems",
        "Problems found in tool-call arguments, by code.",
        labels=("tool", "argument", "code"),
        counts=_problems,
    ),
    MetricSpec(
        "value_checks_by_model",
        Kind.TALLY,
        "tool_argument_value_check_by_model",
        (
            "Values compared with their value set, by the model and prompt version that wrote the call "
            "(as the policy declares them; _other, _none) and whether they were in it as written and "
            "after normalisation."
        ),
        labels=("tool", "argument", "model", "prompt_version", "in_set", "in_set_normalised"),
        counts=_value_checks_by_model,
    ),
    MetricSpec(
        "unavailable",
        Kind.TALLY,
        "tool_argument_check_unavailable",
        "Checks not carried out because the value set could not be read (failed open or closed).",
        labels=("tool", "set"),
        counts=_per_tool(Count.UNAVAILABLE),
    ),
    MetricSpec(
        "repair_started",
        Kind.TALLY,
        "tool_argument_repair_started",
        "Calls rejected, each of which starts a repair by the model.",
        labels=("tool",),
        counts=_per_tool(Count.REPAIR_STARTED),
    ),
    MetricSpec(
        "mismatch_shapes",
        Kind.TALLY,
        "tool_argument_mismatch_shape",
        "Out-of-set values by why they missed: case, separator, retired, invented.",
        labels=("tool", "argument", "shape"),
        counts=_shapes,
    ),
    MetricSpec(
        "repair_succeeded_total",
        Kind.TALLY,
        "tool_argument_repair_succeeded",
        ("Repairs that worked: after a rejection, a later call of the same tool in the same conversation passed."),
        labels=("tool",),
        counts=_per_tool(Count.REPAIR_SUCCEEDED),
    ),
    MetricSpec(
        "repair_abandoned_total",
        Kind.TALLY,
        "tool_argument_repair_abandoned",
        "Repairs never completed: no passing call of the tool in the conversation within repair.remember.",
        labels=("tool",),
        counts=_per_tool(Count.REPAIR_ABANDONED),
    ),
    MetricSpec(
        "repair_attempts",
        Kind.HISTOGRAM,
        "tool_argument_repair_attempts",
        "Rejected attempts a successful repair took.",
        labels=("tool",),
        buckets=(1, 2, 3, 5, 8),
    ),
    MetricSpec(
        "calls_with_problems",
        Kind.TALLY,
        "argwatch_calls_with_problems",
        (
            "Calls with at least one problem, whatever the mode: what reject mode refuses and observe "
            "mode lets through; `invented` says whether a value among them was invented (not a case or "
            "separator slip)."
        ),
        labels=("tool", "invented"),
        counts=_with_problems,
    ),
    MetricSpec(
        "decisions",
        Kind.TALLY,
        "argwatch_decisions",
        "Verdicts, by the mode applied and the decision.",
        labels=("tool", "mode", "decision"),
        counts=_decisions,
    ),
    MetricSpec(
        "mode",
        Kind.GAUGE,
        "argwatch_mode",
        "The mode in force per tool: 0 observe, 1 reject.",
        labels=("tool",),
    ),
    MetricSpec(
        "set_members",
        Kind.GAUGE,
        "argwatch_value_set_members",
        "Members in the value set's snapshot in use.",
        labels=("set",),
    ),
    MetricSpec(
        "decision_log_dropped",
        Kind.COUNTER,
        "argwatch_decision_log_dropped",
        "Decision-log lines not written, by reason (queue_full: the writer fell behind; write_error).",
        labels=("reason",),
    ),
    MetricSpec(
        "set_refresh",
        Kind.COUNTER,
        "argwatch_value_set_refresh",
        "Fetches of a value set from its source, by result (ok, error).",
        labels=("set", "result"),
    ),
    MetricSpec(
        "source_connected",
        Kind.GAUGE,
        "argwatch_source_connected",
        "1 while the source is reachable (watch stream up, or last pull succeeded), else 0.",
        labels=("source",),
    ),
    MetricSpec(
        "set_update_rejected",
        Kind.COUNTER,
        "argwatch_value_set_update_rejected",
        "Malformed updates from a source, rejected (the last good copy kept), by reason.",
        labels=("set", "reason"),
    ),
    MetricSpec(
        "set_resync",
        Kind.COUNTER,
        "argwatch_value_set_resync",
        "Full re-fetches of a set, by reason (version_gap, unknown_base, behind, manual).",
        labels=("set", "reason"),
    ),
    MetricSpec(
        "shared_cache_errors",
        Kind.COUNTER,
        "argwatch_shared_cache_errors",
        "Shared-cache operations that failed or timed out (the gateway went to the source instead).",
        labels=("operation",),
    ),
    MetricSpec(
        "shared_cache_rejections",
        Kind.COUNTER,
        "argwatch_shared_cache_rejected",
        (
            "Values read from Redis that argwatch did not write: ignored (not JSON, an unknown type, a "
            "wrong shape), or cut to the limits argwatch writes within (cut_to_limits)."
        ),
        labels=("reason",),
    ),
    MetricSpec(
        "requests_refused",
        Kind.COUNTER,
        "argwatch_requests_refused",
        "Gateway requests refused with INVALID_ARGUMENT before any check: a field past its length limit.",
        labels=("field",),
    ),
    MetricSpec(
        "rpcs_shed",
        Kind.COUNTER,
        "argwatch_rpcs_shed",
        (
            "Gateway RPCs refused with RESOURCE_EXHAUSTED before any work, by the limit reached: rpcs "
            "(--max-concurrent-rpcs), streams (--max-streams) or streams_per_peer "
            "(--max-streams-per-peer)."
        ),
        labels=("limit",),
    ),
    MetricSpec(
        "streams_open",
        Kind.GAUGE,
        "argwatch_streams_open",
        "ValidateStream calls open now (at most --max-streams).",
    ),
    MetricSpec(
        "streams_idle_closed",
        Kind.COUNTER,
        "argwatch_streams_idle_closed",
        (
            "ValidateStream calls the gateway closed after --stream-idle-seconds, by what they kept it "
            "waiting for: request (none came) or answer (the client did not take it: it stopped reading)."
        ),
        labels=("waiting",),
    ),
    MetricSpec(
        "metrics_scrapes_refused",
        Kind.COUNTER,
        "argwatch_metrics_scrapes_refused",
        (
            "Connections to the /metrics listener answered without the metrics, by why: busy (too many at "
            "once), slow (no request, or the answer not taken, in time) or bad_request."
        ),
        labels=("why",),
    ),
    MetricSpec(
        "table_evictions",
        Kind.COUNTER,
        "argwatch_table_evictions",
        "Entries dropped from a full in-memory table to keep it within its bound (a flood of distinct ids).",
        labels=("table",),
    ),
    MetricSpec(
        "stale_checks",
        Kind.TALLY,
        "tool_argument_check_stale",
        "Checks made against a stale copy of their value set (still checked, against the last good copy).",
        labels=("tool", "set"),
        counts=_per_tool(Count.STALE_CHECKS),
    ),
    MetricSpec(
        "admin_refused",
        Kind.COUNTER,
        "argwatch_admin_refused",
        ("Admin API calls refused: no or unknown token (unauthenticated), or a read-only token changing a mode."),
        labels=("method", "reason"),
    ),
    MetricSpec(
        "rule_errors",
        Kind.COUNTER,
        "argwatch_rule_errors",
        "Rules that could not be evaluated (a missing field, a type mismatch): a check that did not run.",
        labels=("tool", "rule"),
    ),
    MetricSpec(
        "elements_unchecked",
        Kind.COUNTER,
        "argwatch_elements_unchecked",
        "Array elements past the policy's limits.max_elements, not checked (each call lists a skipped check).",
        labels=("tool", "argument"),
    ),
    MetricSpec(
        "stale_downgrades",
        Kind.COUNTER,
        "argwatch_stale_downgrades",
        "Calls judged in observe mode instead of reject because a set was stale and on_stale is observe.",
        labels=("tool", "set"),
    ),
    MetricSpec(
        "validate_seconds",
        Kind.TALLY_HISTOGRAM,
        "argwatch_validate_seconds",
        (
            "Time to judge one call, from the request decoded to the response built (the gRPC transport "
            "not included): Validate and each ValidateStream message."
        ),
        buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
    ),
    MetricSpec(
        "mode_store",
        Kind.GAUGE,
        "argwatch_mode_store_connected",
        "1 while the shared mode store (Redis) answers; 0 while this replica enforces the last modes it knew.",
    ),
    MetricSpec(
        "repeats",
        Kind.TALLY,
        "tool_call_repeat",
        (
            "Calls of a tool with side effects that repeated an earlier call of the same operation within "
            "its window, its outcome success, unknown or never reported (refused in reject mode, let "
            "through in observe)."
        ),
        labels=("tool",),
        counts=_per_tool(Count.REPEATS),
    ),
    MetricSpec(
        "repeat_retries",
        Kind.COUNTER,
        "argwatch_repeat_retries",
        (
            "Repeats let through as genuine retries, by reason: after_failure (the earlier call was "
            "reported failed) or after_status_check (the policy's status tool was called since)."
        ),
        labels=("tool", "reason"),
    ),
    MetricSpec(
        "repeat_check_degraded",
        Kind.COUNTER,
        "argwatch_repeat_check_degraded",
        (
            "Calls of a tool with side effects checked for repeats against this replica's calls only, "
            "because the shared cache (Redis) did not answer (failed open: a repeat on another replica is "
            "not caught)."
        ),
        labels=("tool",),
    ),
    MetricSpec(
        "outcome_reports",
        Kind.COUNTER,
        "argwatch_outcome_reports",
        "ReportOutcome calls, by tool and the outcome reported (succeeded, failed, unknown).",
        labels=("tool", "outcome"),
    ),
    MetricSpec(
        "policy_version",
        Kind.GAUGE,
        "argwatch_policy",
        (
            "1 for the version of the policy this replica serves (a hash of its content); replicas on "
            "different versions are a fleet mid-deploy, or skew."
        ),
        labels=("version",),
    ),
    MetricSpec(
        "policy_reloads",
        Kind.COUNTER,
        "argwatch_policy_reloads",
        (
            "Policy reloads (SIGHUP or Admin.ReloadPolicy), by result: reloaded, unchanged, refused (the "
            "policy in use kept serving)."
        ),
        labels=("result",),
    ),
    MetricSpec(
        "shadow_calls",
        Kind.COUNTER,
        "argwatch_shadow_calls",
        "Calls the shadow policy judged (those it could not, busy or raised, are in argwatch_shadow_failures).",
    ),
    MetricSpec(
        "shadow_differences",
        Kind.COUNTER,
        "argwatch_shadow_differences",
        (
            "Calls the shadow policy judged differently from the live one, by tool (a policy's, or _unknown) "
            "and kind: would_refuse (live allows, shadow refuses), would_allow (live refuses, shadow allows), "
            "different_problems (the same decision, another set of problem codes and paths). Repeat checks "
            "are live-only and left out of the comparison."
        ),
        labels=("tool", "kind"),
    ),
    MetricSpec(
        "shadow_failures",
        Kind.COUNTER,
        "argwatch_shadow_failures",
        (
            "The shadow policy's failures, none of which touches a live verdict: load_failed (refused at "
            "SetShadowPolicy), raised (judging a call raised), busy (too many calls in flight to the shadow: "
            "that call was not judged)."
        ),
        labels=("reason",),
    ),
    MetricSpec(
        "shadow_policy",
        Kind.GAUGE,
        "argwatch_shadow_policy",
        "1 for the version of the shadow policy loaded (no series: none is loaded).",
        labels=("version",),
    ),
)
