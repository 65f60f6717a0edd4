"""The Prometheus alert rules: valid (promtool check rules) and behaving (promtool test rules)."""

from __future__ import annotations

import os
import shutil
import subprocess

import yaml

RULES = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "prometheus")
ALERTS = ("ArgwatchInventionRateHigh", "ArgwatchChecksNotRunning", "ArgwatchValueSetStale",
          "ArgwatchValueSetUnavailable", "ArgwatchReplicasDisagreeOnSetVersion", "ArgwatchReplicasDisagreeOnMode",
          "ArgwatchReplicasDisagreeOnPolicy", "ArgwatchPolicyReloadRefused",
          "ArgwatchSourceDisconnected", "ArgwatchRepeatCheckDegraded", "ArgwatchSideEffectRepeatsHigh",
          "ArgwatchDecisionLogDropping", "ArgwatchShadowIncomplete")  # fmt: skip


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: `make test` installs it (Debian: apt-get install prometheus)"
    return subprocess.run([binary, *args], cwd=RULES, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_are_valid() -> None:
    checked = promtool("check", "rules", "alerts.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


def test_the_rule_unit_tests_pass() -> None:
    tested = promtool("test", "rules", "alerts.test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_summary_a_runbook_and_is_unit_tested() -> None:
    with open(os.path.join(RULES, "alerts.yaml")) as handle:
        rules = [rule for group in yaml.safe_load(handle)["groups"] for rule in group["rules"]]
    with open(os.path.join(RULES, "alerts.test.yaml")) as handle:
        tests = yaml.safe_load(handle)["tests"]
    assert tuple(rule["alert"] for rule in rules) == ALERTS
    for rule in rules:
        assert rule["annotations"]["summary"] and rule["annotations"]["runbook"], rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert tested == set(ALERTS)
