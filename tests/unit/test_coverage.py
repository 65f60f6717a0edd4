"""Argument-surface coverage on a policy of known shape: each argument's verdict and constraints, the covered
share, the suggested bindings and why; nested and imported schemas; the offline command."""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from pathlib import Path

import pytest

from argwatch.server.cli.coverage_command import run, sampled_from_log
from argwatch.server.policy import schema_surface as surface_module
from argwatch.server.policy.coverage import (
    MAX_SUGGESTIONS,
    ArgumentCoverage,
    Counts,
    SampledValues,
    Suggestion,
    policy_coverage,
)
from argwatch.server.policy.loader import load_policy
from argwatch.server.policy.model import Policy
from argwatch.server.policy.schema_compile import FORMATS
from argwatch.server.policy.schema_surface import (
    MAX_CONSTRAINTS,
    MAX_DEPTH,
    MAX_NODES,
    TOO_COMPLEX,
    Coverage,
    SchemaLeaf,
    Surface,
    schema_surface,
)

E, C, T, U = Coverage.ENUMERATED, Coverage.CHECKED, Coverage.TYPED, Coverage.UNCONSTRAINED

MCP_TOOLS = {
    "tools": [
        {
            "name": "refund_order",
            "description": "Refund an order.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "pattern": "^ord_[0-9]+$"},
                    "reason_code": {"type": "string"},
                    "amount_cents": {"type": "integer", "minimum": 1},
                    "note": {"type": "string", "maxLength": 200},
                    "channel_type": {"type": "string"},
                },
                "required": ["order_id", "reason_code", "amount_cents"],
                "additionalProperties": False,
            },
        },
        {
            "name": "search_orders",
            "inputSchema": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}, "status": {"enum": ["open", "shipped"]}},
                "unevaluatedProperties": False,
            },
        },
    ]
}

POLICY = """
sources:
  owners: {grpc: {target: "127.0.0.1:1"}}
value_sets:
  refunds.reason_codes: {source: owners}
tool_definitions: [mcp_tools.json]
tools:
  refund_order:                       # imported: the policy layers a set, a record and a rule on its schema
    arguments:
      reason_code: {value_set: refunds.reason_codes}
    records:
      order: {source: owners, kind: order, id_argument: order_id, owner: customer_id}
    rules:
      - name: not_above_paid
        expr: args.amount_cents <= record.order.paid_cents
        argument: amount_cents
  create_ticket:
    schema:
      type: object
      $defs:
        line:
          type: object
          properties:
            sku: {type: string}
            qty: {type: integer, minimum: 1}
      properties:
        priority: {enum: [low, normal, high]}
        ticket_ref: {type: string, pattern: "^T-[0-9]+$"}
        due: {type: string, format: date}
        body: {type: string, maxLength: 2000}
        urgent: {type: boolean}
        filters:
          type: object
          properties:
            since: {type: string, format: date}
            team_code: {type: string}
        lines: {type: array, items: {$ref: "#/$defs/line"}}
        order_id: {type: string}
        metadata: {}
      additionalProperties: false
  get_refund_status: {}
"""


def write_policy(folder: Path, text: str = POLICY) -> str:
    (folder / "mcp_tools.json").write_text(json.dumps(MCP_TOOLS))
    (folder / "policy.yaml").write_text(textwrap.dedent(text))
    return str(folder / "policy.yaml")


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    return load_policy(write_policy(tmp_path))


def test_every_argument_of_every_tool_with_what_constrains_it(policy: Policy) -> None:
    found = policy_coverage(policy)
    listed = {tool.tool: [(a.argument, a.coverage, a.constraints) for a in tool.arguments] for tool in found.tools}
    assert list(listed) == ["refund_order", "search_orders", "create_ticket", "get_refund_status"]
    assert listed["refund_order"] == [
        ("order_id", C, ("type:string", "pattern", "record:order", "owner")),
        ("reason_code", E, ("type:string", "value_set:refunds.reason_codes")),
        ("amount_cents", C, ("type:integer", "range", "rule:not_above_paid")),
        ("note", T, ("type:string", "length")),  # a length bound lets any note through
        ("channel_type", T, ("type:string",)),
    ]
    assert listed["search_orders"] == [  # imported, and nothing layered on it
        ("customer_id", T, ("type:string",)),
        ("status", E, ("enum",)),
    ]
    assert listed["create_ticket"] == [
        ("priority", E, ("enum",)),
        ("ticket_ref", C, ("type:string", "pattern")),
        ("due", C, ("type:string", "format:date")),
        ("body", T, ("type:string", "length")),
        ("urgent", E, ("type:boolean",)),  # a boolean's type enumerates its two values
        ("filters.since", C, ("type:string", "format:date")),  # an object argument is its properties
        ("filters.team_code", T, ("type:string",)),
        ("lines[*].sku", T, ("type:string",)),  # an array's object items, through a local $ref
        ("lines[*].qty", C, ("type:integer", "range")),
        ("order_id", T, ("type:string",)),
        ("metadata", U, ()),
    ]
    assert listed["get_refund_status"] == []


def test_the_covered_share_counts_enumerated_and_checked_arguments_only(policy: Policy) -> None:
    found = policy_coverage(policy)
    by_tool = {tool.tool: tool.counts for tool in found.tools}
    assert by_tool == {
        "refund_order": Counts(enumerated=1, checked=2, typed=2, unconstrained=0),
        "search_orders": Counts(enumerated=1, checked=0, typed=1, unconstrained=0),
        "create_ticket": Counts(enumerated=2, checked=4, typed=4, unconstrained=1),
        "get_refund_status": Counts(),
    }
    assert found.counts == Counts(enumerated=4, checked=6, typed=7, unconstrained=1)
    assert (found.counts.covered, found.counts.total) == (10, 18)
    assert found.counts.share == 10 / 18
    assert by_tool["refund_order"].share == 3 / 5 and by_tool["get_refund_status"].share == 0.0


def test_a_tool_that_lets_undeclared_arguments_through_says_why(policy: Policy) -> None:
    undeclared = {tool.tool: tool.undeclared for tool in policy_coverage(policy).tools}
    assert undeclared == {
        "refund_order": "",  # additionalProperties: false
        "search_orders": "",  # unevaluatedProperties: false
        "create_ticket": "",
        "get_refund_status": "no schema",
    }


def test_unbound_arguments_that_look_enumerable_are_suggested_by_name(policy: Policy) -> None:
    """Not enumerated, not looked up, and named like an id or a code: order_id with its record check, and
    reason_code with its set, are not suggested."""
    assert policy_coverage(policy).suggestions == (
        Suggestion(
            "refund_order",
            "channel_type",
            "value_set",
            "its name ends in _type: such values come from a set, and none is bound",
        ),
        Suggestion(
            "search_orders",
            "customer_id",
            "record",
            "its name ends in _id: an id names a record, and no record binding looks it up",
        ),
        Suggestion(  # nested: a binding names it by its path
            "create_ticket",
            "filters.team_code",
            "value_set",
            "its name ends in _code: such values come from a set, and none is bound",
        ),
        Suggestion(
            "create_ticket",
            "order_id",
            "record",
            "its name ends in _id: an id names a record, and no record binding looks it up",
        ),
    )


def test_few_distinct_sampled_values_suggest_a_set_and_too_few_samples_or_too_many_values_do_not(
    policy: Policy,
) -> None:
    samples = {
        ("create_ticket", "body"): SampledValues(12, 2, ('"call me"', '"refund please"')),
        ("create_ticket", "lines[*].sku"): SampledValues(9, 2, ('"A"', '"B"')),  # too few samples
        ("refund_order", "note"): SampledValues(40, 6, tuple(f'"n{i}"' for i in range(6))),  # too many values
        ("create_ticket", "metadata"): SampledValues(30, 3, ('"x"', '"y"', '"z"'), complete=False),
        ("create_ticket", "order_id"): SampledValues(20, 4, ('"1"', '"2"', '"3"', '"4"')),
    }
    suggested = {(s.tool, s.argument): s for s in policy_coverage(policy, samples).suggestions}
    assert suggested[("create_ticket", "body")] == Suggestion(
        "create_ticket",
        "body",
        "value_set",
        '12 values sampled, 2 distinct ("call me", "refund please"): the model writes it from a small vocabulary',
    )
    assert suggested[("create_ticket", "order_id")].reason == (
        "its name ends in _id: an id names a record, and no record binding looks it up; "
        '20 values sampled, 4 distinct ("1", "2", "3", and 1 more): the model writes it from a small vocabulary'
    )
    assert ("create_ticket", "lines[*].sku") not in suggested
    assert ("refund_order", "note") not in suggested
    assert ("create_ticket", "metadata") not in suggested  # the table overflowed: distinct is only a floor


def test_redacted_arguments_are_never_suggested_from_their_samples(tmp_path: Path) -> None:
    """A redacted argument's samples all read REDACTED: one distinct value, which says nothing."""
    policy = load_policy(write_policy(tmp_path, POLICY + "sampling: {redact: [body]}\n"))
    samples = {("create_ticket", "body"): SampledValues(50, 1, ("REDACTED",))}
    assert all(s.argument != "body" for s in policy_coverage(policy, samples).suggestions)


RULES_AND_FORMATS = """
sources:
  owners: {grpc: {target: "127.0.0.1:1"}}
formats: annotate
tools:
  book:
    schema:
      type: object
      properties:
        window: {type: object, properties: {since: {type: string, format: date}, until: {type: string}}}
        seats: {type: integer}
        tag: {anyOf: [{enum: [a, b]}, {type: string}]}
        mode: {allOf: [{type: string}, {enum: [x, y]}]}
        secret: false
    rules:
      - {name: ordered, expr: "args.window.until > args.window.since", argument: window}
      - {name: few_seats, expr: "args.seats < 10 && args.note.size() < 100", types: {note: string}}
"""


def test_rules_count_for_the_paths_they_read_and_annotated_formats_check_nothing(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path, RULES_AND_FORMATS))
    (tool,) = policy_coverage(policy).tools
    assert tool.arguments == (
        ArgumentCoverage("window.since", C, ("type:string", "rule:ordered")),  # format: annotate -> not listed
        ArgumentCoverage("window.until", C, ("type:string", "rule:ordered")),
        ArgumentCoverage("seats", C, ("type:integer", "rule:few_seats")),
        ArgumentCoverage("tag", T, ("enum", "type:string")),  # anyOf: the weakest branch counts
        ArgumentCoverage("mode", E, ("type:string", "enum")),  # allOf: the strongest
        ArgumentCoverage("secret", E, ("false",)),  # it may not be sent at all
        ArgumentCoverage("note", C, ("rule:few_seats",)),  # named only by a rule
    )
    assert tool.undeclared == "additionalProperties is not false"


def test_suggestions_and_listed_rows_are_bounded(tmp_path: Path) -> None:
    properties = ", ".join(f"a{i}_code: {{type: string}}" for i in range(300))
    text = f"""
    sources: {{owners: {{grpc: {{target: "127.0.0.1:1"}}}}}}
    tools:
      wide: {{schema: {{type: object, properties: {{{properties}}}}}}}
    """
    found = policy_coverage(load_policy(write_policy(tmp_path, text)))
    (tool,) = found.tools
    assert (len(tool.arguments), tool.left_off, tool.counts.total) == (200, 100, 300)
    assert (len(found.suggestions), found.suggestions_left_off) == (MAX_SUGGESTIONS, 300 - MAX_SUGGESTIONS)


def test_a_sampled_log_is_read_per_tool_and_argument_with_indices_as_stars() -> None:
    lines = [
        '{"tool": "t", "argument": "lines[0].sku", "value": "\\"A\\""}',
        '{"tool": "t", "argument": "lines[12].sku", "value": "\\"A\\""}',
        '{"tool": "t", "argument": "lines[3].sku", "value": "\\"B\\""}',
        "not json",
        '{"tool": "t", "argument": "x"}',
        "",
    ]
    assert sampled_from_log(lines) == {("t", "lines[*].sku"): SampledValues(3, 2, ('"A"', '"B"'))}


def command_args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {"policy": "", "samples": "", "json": False, "admin": "127.0.0.1:9"}
    return argparse.Namespace(**(defaults | given))


def test_the_offline_command_prints_the_table_and_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_policy(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(f'{{"tool": "create_ticket", "argument": "body", "value": "\\"v{i % 2}\\""}}\n' for i in range(10))
    )
    assert run(command_args(policy=path, samples=str(samples)), {}) == 0
    out = capsys.readouterr().out.splitlines()
    version = load_policy(path).version
    assert out[0] == (
        f"argument coverage of policy {version}: 18 arguments, 10 of 18 covered (55.6%): "
        "4 enumerated, 6 checked, 7 typed only, 1 unconstrained"
    )
    assert "refund_order: 3 of 5 covered (60.0%)" in out
    assert "get_refund_status: no argument named; arguments it does not name pass unchecked (no schema)" in out
    assert "  filters.team_code  typed          type:string" in out
    assert "suggested bindings: 5" in out
    assert (
        '  create_ticket.body (value_set): 10 values sampled, 2 distinct ("v0", "v1"): '
        "the model writes it from a small vocabulary"
    ) in out
    assert out[-1] == f"sampled values read: {samples}"
    assert run(command_args(policy=path, json=True), {}) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["counts"] == {"enumerated": 4, "checked": 6, "typed": 7, "unconstrained": 1, "covered_share": 10 / 18}
    assert shown["tools"][3] == {
        "tool": "get_refund_status",
        "counts": {"enumerated": 0, "checked": 0, "typed": 0, "unconstrained": 0, "covered_share": 0.0},
        "arguments": [],
        "arguments_left_off": 0,
        "undeclared_arguments": "no schema",
    }


def test_the_offline_command_fails_with_the_reason_on_a_bad_policy_or_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_text("tools: {}\n")
    assert run(command_args(policy=str(tmp_path / "bad.yaml")), {}) == 1
    assert "expected at least one tool" in capsys.readouterr().err
    assert run(command_args(policy=write_policy(tmp_path), samples=str(tmp_path / "none.jsonl")), {}) == 1
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--samples goes with --policy"):
        run(command_args(samples="x.jsonl"), {})


DOCS = Path(__file__).parents[2] / "docs" / "measuring.md"
EXAMPLES = Path(__file__).parents[2] / "examples"


def documented_section() -> str:
    return DOCS.read_text().split("## What it does not check: coverage", 1)[1].split("\n## ", 1)[0]


def documented_blocks() -> tuple[list[str], str]:
    """The coverage section's output blocks (no language) and its example policy (the yaml block)."""
    section = documented_section()
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    (policy,) = [text for language, text in blocks if language == "yaml"]
    return [text for language, text in blocks if not language], policy


def without_version(text: str) -> str:
    return re.sub(r"policy [0-9a-f]{12}:", "policy <version>:", text)


def test_the_documented_examples_are_the_commands_real_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/measuring.md's worked examples are computed, not typed in: both outputs as the command prints them."""
    (demo, example), policy = documented_blocks()
    assert run(command_args(policy=str(EXAMPLES / "policy.yaml")), {}) == 0
    assert without_version(capsys.readouterr().out) == without_version(demo)
    (tmp_path / "transfer_stock.yaml").write_text(policy)
    assert run(command_args(policy=str(tmp_path / "transfer_stock.yaml")), {}) == 0
    assert without_version(capsys.readouterr().out) == without_version(example)
    # What the prose says the two suggestions would do: a record for carrier_id, an enum for label_type.
    bound = policy.replace(
        "  local: {file: value_sets.yaml}", '  local: {file: value_sets.yaml}\n  carriers: {grpc: {target: "c:1"}}'
    ).replace("label_type: {type: string}", "label_type: {enum: [standard, fragile]}")
    bound += "    records:\n      carrier: {source: carriers, kind: carrier, id_argument: carrier_id}\n"
    (tmp_path / "bound.yaml").write_text(bound)
    counts = policy_coverage(load_policy(str(tmp_path / "bound.yaml"))).counts
    assert (counts.covered, counts.total) == (6, 8)


def surface_of(tmp_path: Path, schema: str, tool: str = "t") -> tuple[Surface, Policy]:
    """The schema surface of one tool whose schema is `schema` (YAML, indented for the tool)."""
    policy = load_policy(write_policy(tmp_path, f"tools:\n  {tool}:\n    schema:\n{textwrap.indent(schema, '      ')}"))
    found = policy.tools[tool]
    return schema_surface(found.schema, found.assert_formats), policy


@pytest.mark.parametrize("branches", [2, 3, 50])
def test_a_cyclic_reference_is_judged_once_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, branches: int
) -> None:
    """The reviewer's schema (/tmp/review21/cyc.py): a definition whose anyOf branches all refer back to it.
    Each reference is resolved once and the cycle is stopped: the work is a few nodes a branch, where
    re-entering each $ref 16 deep took 0.8 s at 2 branches and over 120 s at 3."""
    looked_up: list[str] = []
    pointer = surface_module._pointer

    def counted(root: dict[str, object], at: str) -> object:
        looked_up.append(at)
        return pointer(root, at)

    monkeypatch.setattr(surface_module, "_pointer", counted)
    refs = ", ".join(['{"$ref": "#/$defs/a"}'] * branches)
    schema = f"""
    type: object
    $defs:
      a: {{anyOf: [{refs}, {{type: string}}]}}
    properties:
      x: {{$ref: "#/$defs/a"}}
    """
    surface, _ = surface_of(tmp_path, textwrap.dedent(schema))
    # One branch enough: a value may take the cyclic one, which constrains nothing.
    assert surface.leaves["x"].constraints == ("cycle:#/$defs/a", "type:string")
    assert surface.leaves["x"].coverage is U
    assert surface.nodes <= branches + 10
    assert len(looked_up) <= branches + 5


def test_a_reference_shared_by_many_branches_is_judged_once(tmp_path: Path) -> None:
    """40 definitions, each an anyOf of two references to the one before: 2**40 paths, 40 definitions."""
    defs = ["d0: {type: string, pattern: '^[a-z]+$'}"]
    defs += [f"d{k}: {{anyOf: [{{$ref: '#/$defs/d{k - 1}'}}, {{$ref: '#/$defs/d{k - 1}'}}]}}" for k in range(1, 41)]
    schema = "type: object\n$defs:\n" + "".join(f"  {line}\n" for line in defs)
    surface, _ = surface_of(tmp_path, schema + "properties:\n  x: {$ref: '#/$defs/d40'}\n")
    assert surface.leaves["x"] == SchemaLeaf("x", ("type:string", "pattern"), C)
    assert surface.nodes <= 4 * 41


WIDE_TREE = """
sources:
  owners: {grpc: {target: "127.0.0.1:1"}}
value_sets:
  refunds.reason_codes: {source: owners}
tools:
  deep:
    schema:
      type: object
      $defs:
        node: {type: object, properties: {%s}}
      properties:
        first: {type: string, pattern: "^a$"}
        tree: {$ref: "#/$defs/node"}
        last: {type: string, pattern: "^z$"}
        reason_code: {type: string}
    arguments:
      reason_code: {value_set: refunds.reason_codes}
  other:
    schema: {type: object, properties: {y: {enum: [1, 2]}}}
"""


def test_past_its_node_budget_a_tools_remaining_arguments_are_too_complex_to_assess(tmp_path: Path) -> None:
    """An object whose 30 properties are each the object again: 30**4 paths four names deep. The walk stops
    at MAX_NODES; what it did not reach is listed as too complex and counted, never as covered."""
    children = ", ".join(f'c{i}: {{$ref: "#/$defs/node"}}' for i in range(30))
    policy = load_policy(write_policy(tmp_path, WIDE_TREE % children))
    surface = schema_surface(policy.tools["deep"].schema, True)
    assert MAX_NODES <= surface.nodes <= MAX_NODES + 1
    assert len(surface.leaves) <= MAX_NODES + MAX_DEPTH * 30 + 3
    deep, other = policy_coverage(policy).tools
    rows = {row.argument: row for row in deep.arguments}
    assert rows["first"] == ArgumentCoverage("first", C, ("type:string", "pattern"))
    assert rows["last"] == ArgumentCoverage("last", U, (TOO_COMPLEX,))
    # The policy's own binding is checked whatever the schema: it still enumerates the argument.
    assert rows["reason_code"] == ArgumentCoverage("reason_code", E, (TOO_COMPLEX, "value_set:refunds.reason_codes"))
    too_complex = [row for row in surface.leaves.values() if TOO_COMPLEX in row.constraints]
    assert too_complex and all(row.coverage is U for row in too_complex)
    assert deep.counts.covered == 2  # first, and reason_code by its binding: nothing past the budget
    assert deep.counts.unconstrained == len(too_complex) - 1  # all but reason_code
    assert other.arguments == (ArgumentCoverage("y", E, ("enum",)),)  # a tool's budget is its own


def test_a_format_counts_only_where_the_gateway_has_a_checker_for_it(tmp_path: Path) -> None:
    """With `formats: assert` the gateway checks the formats jsonschema has checkers for with the packages
    argwatch installs (uri, date-time, hostname, email, ipv4, ...), and lets any text through as another."""
    unchecked = ("frobnicate",)
    assert not set(unchecked) & set(FORMATS.checkers)
    assert {"email", "ipv4", "uri", "date-time", "hostname"} <= set(FORMATS.checkers)
    fields = {"u": "uri", "d": "date-time", "e": "email", "f": "frobnicate", "i": "ipv4", "h": "hostname"}
    properties = "".join(f"  {name}: {{type: string, format: {kind}}}\n" for name, kind in fields.items())
    surface, _ = surface_of(tmp_path, f"type: object\nproperties:\n{properties}additionalProperties: false\n")
    assert [(leaf.path, leaf.coverage, leaf.constraints) for leaf in surface.leaves.values()] == [
        ("u", C, ("type:string", "format:uri")),
        ("d", C, ("type:string", "format:date-time")),
        ("e", C, ("type:string", "format:email")),
        ("f", T, ("type:string", "format:frobnicate (no checker: not checked)")),
        ("i", C, ("type:string", "format:ipv4")),
        ("h", C, ("type:string", "format:hostname")),
    ]
    bare, _ = surface_of(tmp_path, "type: object\nproperties:\n  u: {format: frobnicate}\n")
    assert bare.leaves["u"].coverage is U  # an unchecked format constrains nothing


def test_paths_go_four_property_names_deep_and_an_array_index_is_not_one(tmp_path: Path) -> None:
    schema = """
    type: object
    properties:
      a: {type: object, properties: {b: {type: object, properties: {c: {type: object, properties: {
           d: {type: object, properties: {e: {type: string}}}}}}}}}
      l: {type: array, items: {type: object, properties: {m: {type: array, items: {type: object, properties: {
           n: {type: array, items: {type: object, properties: {o: {type: integer}}}}}}}}}}
    """
    surface, _ = surface_of(tmp_path, textwrap.dedent(schema))
    assert list(surface.leaves) == ["a.b.c.d", "l[*].m[*].n[*].o"]
    assert surface.leaves["a.b.c.d"].constraints == ("type:object",)  # the fourth name is a leaf, judged whole


def test_the_documented_bounds_are_the_codes() -> None:
    prose = " ".join(documented_section().split())
    assert MAX_DEPTH == 4 and "Paths go up to four property names deep" in prose
    assert f"visits at most {MAX_NODES:,} nodes" in prose
    assert f"at most {MAX_CONSTRAINTS} of a schema's constraints per argument" in prose
    assert f"listed as `{TOO_COMPLEX}`" in prose
    assert "`format:date_time (no checker: not checked)`" in " ".join(prose.split())


def test_a_rows_schema_constraints_are_bounded_and_clipped(tmp_path: Path) -> None:
    """The schema's own text (a format's name, a type list) is third-party: a row lists at most
    MAX_CONSTRAINTS of it, each clipped, and an anchor reference (#name) is not taken for the root."""
    formats = ", ".join(f"{{format: f{index}{'x' * 200}}}" for index in range(40))
    schema = f"type: object\nproperties:\n  many: {{anyOf: [{formats}]}}\n  anchored: {{$ref: '#name'}}\n"
    surface, _ = surface_of(tmp_path, schema)
    many = surface.leaves["many"].constraints
    assert len(many) == MAX_CONSTRAINTS and many[-1] == "..."
    assert all(len(constraint) <= 120 for constraint in many)
    assert many[0] == "format:f0" + "x" * 70 + "… (no checker: not checked)"  # 80 characters of it
    assert surface.leaves["anchored"] == SchemaLeaf("anchored", (), U)


def test_the_answer_stays_under_grpc_s_limit_however_long_the_names_a_definitions_file_gives() -> None:
    """Argument names come from third-party tool definitions: 5,000 listed rows of 4,000-character names
    and 16 long constraints each would be ~100 MB. Names are clipped, and rows past the byte budget counted."""
    from argwatch.server.edge.admin_service import MAX_COVERAGE_BYTES, MAX_COVERAGE_NAME, coverage_to_wire
    from argwatch.server.policy.coverage import PolicyCoverage, ToolCoverage

    rows = tuple(ArgumentCoverage(f"{i:04d}" + "x" * 4000, C, ("pattern",) + ("f" * 80,) * 15) for i in range(2500))
    tools = tuple(ToolCoverage(f"t{t}", Counts(checked=2500), rows, 0, "") for t in range(2))
    answer = coverage_to_wire(PolicyCoverage("v1", Counts(checked=5000), tools, (), 0), "none")
    assert answer.ByteSize() < 4 << 20
    listed = [row for tool in answer.tools for row in tool.arguments]
    assert all(len(row.argument) <= MAX_COVERAGE_NAME for row in listed)
    assert len(listed) + sum(tool.arguments_left_off for tool in answer.tools) == 5000  # every row accounted for
    assert sum(tool.arguments_left_off for tool in answer.tools) > 0 and MAX_COVERAGE_BYTES < 4 << 20
