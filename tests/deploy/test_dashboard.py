"""The Grafana dashboard: it parses, its queries are valid PromQL, and it reads only metrics the gateway exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from argwatch.server.telemetry.metrics import GatewayMetrics

DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "grafana", "argwatch.json")
METRIC = re.compile(r"\b((?:tool_argument|argwatch)_[a-z_]+)\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def load() -> dict[str, Any]:
    with open(DASHBOARD) as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def queries(dashboard: dict[str, Any]) -> list[str]:
    found = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    found += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return found


def exported_names() -> set[str]:
    """Every sample name the gateway's registry can produce, from its families and their types."""
    registry = CollectorRegistry()
    GatewayMetrics(registry)
    names = set()
    for family in registry.collect():
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def test_the_dashboard_uses_only_metrics_the_gateway_exports() -> None:
    dashboard = load()
    used = {name for query in queries(dashboard) for name in METRIC.findall(query)}
    assert used, "the dashboard reads no argwatch metric"
    assert used <= exported_names(), f"not exported: {sorted(used - exported_names())}"


def test_the_dashboard_covers_what_on_call_needs() -> None:
    used = " ".join(queries(load()))
    for needed in (
        'in_set="false"',  # the raw mismatch rate
        'in_set_normalised="false"',  # and after normalisation: the gap is the formatting tax
        "tool_argument_check_unavailable_total",  # fail-open
        "argwatch_value_set_age_seconds",  # staleness
        "tool_argument_repair_succeeded_total",  # the repair funnel
        "argwatch_decisions_total",  # decisions by mode
        "argwatch_validate_seconds_bucket",  # latency
        "tool_call_repeat_total",  # side effects repeated
        "argwatch_repeat_check_degraded_total",  # and a repeat check that stopped reaching every replica
    ):
        assert needed in used, needed


def test_every_query_is_valid_promql(tmp_path) -> None:
    """promtool parses each query, as a recording rule (Grafana's $tool replaced by a regex)."""
    rules = [
        {"record": f"argwatch:dashboard_query_{index}", "expr": query.replace("$tool", ".*")}
        for index, query in enumerate(q for q in queries(load()) if not q.startswith("label_values"))
    ]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: `make test` installs it (Debian: apt-get install prometheus)"
    checked = subprocess.run(
        [binary, "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout


def test_panels_have_unique_ids_and_a_description() -> None:
    panels = load()["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    assert all(panel["title"] and panel["description"] for panel in panels)
