"""Policy files: the demo policy loads; every error names the file, its line, the key path and what was expected."""

from __future__ import annotations

import os
import textwrap

import pytest

from argwatch.server.policy.loader import PolicyError, load_policy, parse_policy
from argwatch.server.policy.model import CaseRule, Failure, FileSourceConfig, GrpcSourceConfig, Mode

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

GOOD = """
default_mode: observe
sources:
  owners: {grpc: {target: "127.0.0.1:50061", timeout: 250ms}}
  local: {file: sets.yaml}
value_sets:
  refunds.reason_codes: {source: owners, ttl: 2m, failure: closed}
  wms.warehouses: {source: local}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code:
        value_set: refunds.reason_codes
        normalise: {case: sensitive, separators: "_"}
  transfer_stock:
    arguments:
      warehouse_code: {value_set: wms.warehouses, required: false}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(textwrap.dedent(text).encode(), "/etc/argwatch/policy.yaml")
    assert all(line.startswith("/etc/argwatch/policy.yaml") for line in str(raised.value).splitlines())
    return [f"{issue.path}: {issue.message}" for issue in raised.value.issues]


def test_the_bundled_demo_policy_binds_the_four_arguments_from_the_field_and_a_nested_order() -> None:
    policy = load_policy(os.path.join(EXAMPLES, "policy.yaml"))
    bound = {(tool, b.name): b.value_set for tool, t in policy.tools.items() for b in t.arguments}
    assert bound == {
        ("refund_order", "reason_code"): "refunds.reason_codes",
        ("create_ticket", "component_id"): "catalog.components",
        ("create_ticket", "assignee"): "identity.active_handles",
        ("transfer_stock", "warehouse_code"): "wms.warehouses",
        ("create_order", "items[*].sku"): "catalog.skus",
        ("create_order", "payment_method_id"): "payments.methods",
        ("create_order", "shipping.country"): "geo.countries",
    }


def test_a_good_policy_is_read_with_its_settings_and_defaults() -> None:
    policy = parse_policy(GOOD.encode(), "/srv/policy.yaml")
    assert policy.tools["refund_order"].mode is Mode.REJECT
    assert policy.tools["transfer_stock"].mode is Mode.OBSERVE
    assert policy.value_sets["refunds.reason_codes"].ttl_seconds == 120
    assert policy.value_sets["refunds.reason_codes"].failure is Failure.CLOSED
    assert policy.value_sets["wms.warehouses"].ttl_seconds == 300
    assert policy.sources["owners"] == GrpcSourceConfig("127.0.0.1:50061", 0.25)
    assert policy.sources["local"] == FileSourceConfig("/srv/sets.yaml")
    reason = policy.tools["refund_order"].arguments[0]
    assert (reason.normalisation.case, reason.normalisation.separators) == (CaseRule.SENSITIVE, "_")
    assert policy.tools["transfer_stock"].arguments[0].required is False
    assert len(policy.version) == 12


def test_an_unknown_key_is_named_with_its_path_and_the_keys_expected() -> None:
    errors = errors_of(GOOD.replace("mode: reject", "mode: reject\n    modes: reject"))
    assert errors == [
        "tools.refund_order.modes: unknown key; did you mean 'mode'? expected one of "
        "arguments, description, formats, log_values, mode, records, rules, schema, side_effect"
    ]


def test_a_tool_bound_to_an_undefined_set_is_an_error() -> None:
    errors = errors_of(GOOD.replace("value_set: refunds.reason_codes", "value_set: refunds.reasons"))
    assert errors == [
        "tools.refund_order.arguments.reason_code.value_set: undefined value set 'refunds.reasons'; "
        "value sets: refunds.reason_codes, wms.warehouses"
    ]


@pytest.mark.parametrize("ttl", ["-5s", "0", "soon", "5 minutes", "true"])
def test_a_bad_ttl_is_an_error(ttl: str) -> None:
    (error,) = errors_of(GOOD.replace("ttl: 2m", f"ttl: {ttl}"))
    assert error.startswith("value_sets.refunds.reason_codes.ttl: expected a duration")


def test_every_error_is_listed_not_only_the_first() -> None:
    errors = errors_of(
        """
        default_mode: enforce
        sources:
          owners: {grpc: {timeout: 1s}}
          both: {grpc: {target: "a:1"}, file: x.yaml}
        value_sets:
          s1: {source: nowhere, failure: maybe}
        tools:
          t:
            arguments:
              a: {value_set: s2, normalise: {case: upper}}
        sampling: {rate: 50}
        """
    )
    assert errors == [
        "sources.owners.grpc.target: required; expected a string",
        "sources.both: expected exactly one of grpc or file",
        "value_sets.s1.source: undefined source 'nowhere'; sources: none are defined",
        "value_sets.s1.failure: expected one of open, closed, got 'maybe'",
        "default_mode: expected one of observe, reject, got 'enforce'",
        "tools.t.arguments.a.value_set: undefined value set 's2'; value sets: s1",
        "tools.t.arguments.a.normalise.case: expected one of sensitive, insensitive, got 'upper'",
        "sampling.rate: expected a fraction from 0 to 1 (0.02 is 1 in 50), got 50",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ": expected a mapping with sources, value_sets and tools"),
        ("tools: [a, b]", "tools: expected a mapping of names to entries, got a list"),
        ("tools:\n  a: {arguments: {x: {}}}", "tools.a.arguments.x.value_set: required; expected a string"),
        ("key: [unclosed", ": not valid YAML"),
    ],
)
def test_malformed_documents_get_a_clear_error(text: str, expected: str) -> None:
    assert any(error.startswith(expected) for error in errors_of(text))


def test_a_missing_file_is_a_policy_error_naming_it(tmp_path: os.PathLike[str]) -> None:
    missing = os.path.join(str(tmp_path), "nope.yaml")
    with pytest.raises(PolicyError, match=r"nope\.yaml: cannot read the file"):
        load_policy(missing)


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ("models: {names: gpt-4.1}", "models.names: expected a list of names, got 'gpt-4.1'"),
        (
            "models: {names: [_other]}",
            "models.names: '_other': a name is 1 to 128 characters and does not start with _",
        ),
        (
            "models: {prompt_versions: [" + ", ".join(f"v{i}" for i in range(17)) + "]}",
            "models.prompt_versions: at most 16 names (each is a label value of every split series)",
        ),
        (
            "models: {name: [a]}",
            "models.name: unknown key; did you mean 'names'? expected one of names, prompt_versions",
        ),
        ('models: {names: ["gpt\\x1f4"]}', "models.names: 'gpt\\x1f4': a name has no control characters"),
    ],
)
def test_the_models_section_takes_a_bounded_list_of_plain_names(section: str, error: str) -> None:
    (found,) = errors_of(GOOD + "\n" + section + "\n")
    assert found.startswith(error)


def test_declared_models_are_label_values_and_anything_else_is_other_or_none() -> None:
    policy = parse_policy((GOOD + "\nmodels: {names: [gpt-4.1-mini], prompt_versions: [v13]}\n").encode(), "p.yaml")
    cohorts = policy.cohorts
    assert cohorts.labels("gpt-4.1-mini", "v13") == ("gpt-4.1-mini", "v13")
    assert cohorts.labels("gpt-4.1-mini ", "V13") == ("_other", "_other")  # names are matched exactly
    assert cohorts.labels("", "") == ("_none", "_none")
    assert not parse_policy(GOOD.encode(), "p.yaml").cohorts.declared


def rendered(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(textwrap.dedent(text).encode(), "policy.yaml")
    return str(raised.value).splitlines()


def test_every_error_names_its_line_and_column_in_the_shape_editors_link() -> None:
    """file:line:column: path: message, the line being where the key is written."""
    assert rendered(GOOD.replace("ttl: 2m", "ttl: soon")) == [
        "policy.yaml:7:42: value_sets.refunds.reason_codes.ttl: expected a duration such as "
        "300, '30s', '250ms', '5m' or '1h30m', got 'soon'"
    ]
    assert rendered(GOOD.replace("      reason_code:\n", "      reason_code:\n        requird: false\n")) == [
        "policy.yaml:14:9: tools.refund_order.arguments.reason_code.requird: unknown key; did you mean 'required'? "
        "expected one of hint, normalise, required, reveal_other_scopes, value_set"
    ]


def test_a_missing_key_is_placed_at_the_mapping_that_lacks_it_and_a_list_item_at_the_item() -> None:
    text = """
    tools:
      t:
        arguments:
          a: {normalise: {}}
        rules:
          - {expr: "args.x >", types: {x: integer}}
    """
    located = [line.split(": ", 2)[:2] for line in rendered(text) if line.startswith("policy.yaml")]
    assert located == [
        ["policy.yaml:5:7", "tools.t.arguments.a.value_set"],  # `a:`, which has no value_set
        ["policy.yaml:7:10", "tools.t.rules[0].expr"],  # the CEL error (its message runs over three lines)
    ]


def test_an_unknown_key_with_no_close_match_gets_no_guess() -> None:
    (found,) = errors_of(GOOD.replace("mode: reject", "mode: reject\n    colour: blue"))
    assert "did you mean" not in found and found.startswith("tools.refund_order.colour: unknown key; expected")


def test_a_syntax_error_names_its_line_and_column() -> None:
    assert rendered("tools:\n  t: [unclosed\n") == [
        "policy.yaml:3:1: not valid YAML: expected ',' or ']', but got '<stream end>'"
    ]


def test_a_key_given_twice_names_its_real_path_and_both_lines() -> None:
    """Not `<top>`: the path of the key itself, at the second line, naming the first."""
    text = GOOD.replace("  transfer_stock:\n", "  transfer_stock:\n    mode: observe\n    mode: reject\n")
    assert rendered(text) == [
        "policy.yaml:18:5: tools.transfer_stock.mode: 'mode' given again at line 18 (first at line 17); "
        "YAML would keep only the last"
    ]
    twice = GOOD + "  refund_order: {mode: observe}\n"
    assert rendered(twice)[0].startswith(
        "policy.yaml:19:3: tools.refund_order: 'refund_order' given again at line 19 (first at line 10)"
    )


LOGGED = """
sources:
  local: {file: sets.yaml}
value_sets:
  wms.warehouses: {source: local}
tools:
  transfer_stock:
    schema: {type: object, properties: {warehouse_code: {type: string}, note: {type: string}}}
    arguments:
      warehouse_code: {value_set: wms.warehouses}
    log_values: {warehouse_code: clear, note: none}
"""


def test_log_values_name_top_level_arguments_each_none_hashed_or_clear() -> None:
    from argwatch.server.policy.model import ValueLogging

    policy = parse_policy(
        textwrap.dedent(LOGGED + "decision_log: {values: clear, session: none}\n").encode(), "/p.yaml"
    )
    tool = policy.tools["transfer_stock"]
    assert tool.log_values == {"warehouse_code": ValueLogging.CLEAR, "note": ValueLogging.NONE}
    assert policy.decision_log.values is ValueLogging.CLEAR
    assert policy.decision_log.session is ValueLogging.NONE
    assert parse_policy(textwrap.dedent(GOOD).encode(), "/p.yaml").decision_log.values is ValueLogging.HASHED


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("note: none", "note: plain"), "tools.transfer_stock.log_values.note: expected one of none, hashed, clear"),
        (("note: none", "memo: none"), "tools.transfer_stock.log_values.memo: not an argument of this tool"),
        (("note: none", "note.text: none"), "tools.transfer_stock.log_values.note.text: name a top-level argument"),
    ],
)
def test_a_bad_log_values_entry_is_named(change: tuple[str, str], expected: str) -> None:
    found = errors_of(LOGGED.replace(*change))
    assert any(error.startswith(expected) for error in found), found


def test_clear_for_a_redacted_argument_is_a_contradiction_not_a_choice() -> None:
    found = errors_of(LOGGED + "sampling: {redact: [warehouse_code]}\n")
    assert found == [
        "tools.transfer_stock.log_values.warehouse_code: sampling.redact names this argument: it is never written "
        "as sent (say hashed or none)"
    ]
