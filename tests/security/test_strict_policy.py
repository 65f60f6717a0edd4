"""Issue 17.6: a key given twice in a policy (or a tool defined twice across definition files) is refused,
naming both places. Before, YAML kept the last: a reject-mode tool with a binding, written again below as
observe, silently became the observe one, and an invented warehouse code was allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from argwatch.server.policy.loader import PolicyError, load_policy, parse_policy

TWICE = """\
value_sets:
  wms.warehouses: {source: local}
sources:
  local: {file: sets.yaml}
tools:
  transfer_stock:
    mode: reject
    arguments:
      warehouse_code: {value_set: wms.warehouses}
  transfer_stock:
    mode: observe
"""


def test_a_tool_given_twice_is_refused_with_both_lines() -> None:
    with pytest.raises(PolicyError) as refused:
        parse_policy(TWICE.encode(), "/srv/policy.yaml")
    assert "'transfer_stock' given again" in str(refused.value)
    assert "line 10" in str(refused.value) and "first at line 6" in str(refused.value)


def test_a_key_given_twice_deep_inside_is_refused_too() -> None:
    text = TWICE.replace("  transfer_stock:\n    mode: observe\n", "").replace(
        "    mode: reject\n", "    mode: reject\n    mode: observe\n"
    )
    with pytest.raises(PolicyError, match="'mode' given again"):
        parse_policy(text.encode(), "/srv/policy.yaml")


def test_policy_check_says_so_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(TWICE)
    (tmp_path / "sets.yaml").write_text("wms.warehouses: {members: [AMS-1]}\n")
    argwatch = os.path.join(os.path.dirname(sys.executable), "argwatch")
    result = subprocess.run(
        [argwatch, "policy", "check", str(tmp_path / "policy.yaml")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and "given again" in result.stderr


def definitions(tool: str) -> list[dict[str, object]]:
    return [{"name": tool, "inputSchema": {"type": "object"}}]


def test_a_tool_defined_in_two_definition_files_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"tools": definitions("lookup")}))
    (tmp_path / "b.json").write_text(json.dumps({"tools": definitions("lookup")}))
    (tmp_path / "policy.yaml").write_text("tool_definitions: [a.json, b.json]\n")
    with pytest.raises(PolicyError, match=r"b.json defines the tool 'lookup' again \(first in a.json\)"):
        load_policy(str(tmp_path / "policy.yaml"))


def test_a_definition_file_with_a_tool_or_a_key_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "twice.json").write_text(json.dumps({"tools": definitions("lookup") + definitions("lookup")}))
    (tmp_path / "keys.json").write_text('{"tools": [{"name": "a", "name": "b"}]}')
    for file, message in (("twice.json", "defined twice"), ("keys.json", "given twice")):
        (tmp_path / "policy.yaml").write_text(f"tool_definitions: [{file}]\n")
        with pytest.raises(PolicyError, match=message):
            load_policy(str(tmp_path / "policy.yaml"))
