"""Exported tool definitions carry every argument the policy knows of, required exactly where the policy says."""

from __future__ import annotations

import os
from typing import Any

import pytest

from argwatch.server.policy.arg_paths import top_of
from argwatch.server.policy.loader import load_policy, parse_policy
from argwatch.server.repair.tool_export import export_tool, export_tools
from argwatch.server.sets.snapshot import SetReading
from tests.snapshots import make_snapshot

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "policy.yaml")


def parameters(policy, tool: str, shape: str = "openai") -> dict[str, Any]:
    definition = export_tool(policy, policy.tools[tool], lambda _: None, shape).definition
    found: dict[str, Any]
    if shape == "openai":
        found = definition["function"]["parameters"]
    else:
        found = definition["input_schema" if shape == "anthropic" else "inputSchema"]
    return found


def test_refund_order_carries_the_record_id_and_the_rule_typed_amount() -> None:
    """The issue's case: the example's refund_order was exported with reason_code alone, so a model never sent
    order_id and the fail-closed ownership check refused every call."""
    policy = load_policy(EXAMPLE)
    schema = parameters(policy, "refund_order")
    assert schema["properties"]["order_id"]["type"] == "string"
    assert schema["properties"]["amount_cents"]["type"] == "integer"
    assert schema["properties"]["reason_code"]["type"] == "string"
    assert sorted(schema["required"]) == ["order_id", "reason_code"]  # amount_cents: not required by the policy
    for shape in ("anthropic", "mcp"):
        assert parameters(policy, "refund_order", shape) == schema


def test_every_example_tool_exports_every_argument_the_policy_knows() -> None:
    policy = load_policy(EXAMPLE)
    exported, _ = export_tools(policy, [], lambda _: None, "mcp")
    for tool in exported:
        properties = tool.definition["inputSchema"]["properties"]
        assert {top_of(known) for known in policy.tools[tool.name].known_arguments} <= set(properties), tool.name


POLICY = b"""
sources:
  owners: {grpc: {target: "127.0.0.1:1"}}
  local: {file: sets.yaml}
value_sets: {wms.warehouses: {source: local}}
tools:
  move:
    arguments:
      warehouse_code: {value_set: wms.warehouses}
      note_code: {value_set: wms.warehouses, required: false}
    records:
      shipment: {source: owners, kind: shipment, id_argument: shipment_id, lookup_tool: find_shipments}
    rules:
      - expr: args.quantity <= record.shipment.units && args.ratio < 2.5
        argument: quantity
        types: {quantity: integer, ratio: [number, "null"]}
"""


@pytest.mark.parametrize("shape", ["openai", "anthropic", "mcp"])
def test_without_a_schema_records_and_rules_still_name_their_arguments(shape: str) -> None:
    policy = parse_policy(POLICY, "/p.yaml")
    schema = parameters(policy, "move", shape)
    assert schema["properties"]["shipment_id"] == {
        "type": "string",
        "description": "The shipment's id, as find_shipments returns it.",
    }
    assert schema["properties"]["quantity"] == {"type": "integer"}
    assert schema["properties"]["ratio"] == {"type": ["number", "null"]}
    assert schema["required"] == ["warehouse_code", "shipment_id"]  # not note_code (required: false), no rule's


def test_a_schema_property_is_kept_as_the_schema_writes_it() -> None:
    policy = parse_policy(
        POLICY.replace(
            b"  move:\n",
            b"  move:\n    schema: {type: object, properties: {shipment_id: {type: string, pattern: '^s_'}}, "
            b"required: [quantity]}\n",
        ),
        "/p.yaml",
    )
    schema = parameters(policy, "move")
    assert schema["properties"]["shipment_id"] == {"type": "string", "pattern": "^s_"}
    assert schema["required"] == ["quantity", "warehouse_code", "shipment_id"]


def test_a_record_id_inside_an_array_is_left_to_the_schemas_own_shape() -> None:
    """`items[*].order_id` is no top-level argument: exporting it as one would ask the model for a key
    named "items[*].order_id"."""
    policy = parse_policy(
        b"""
sources: {owners: {grpc: {target: "127.0.0.1:1"}}}
tools:
  refund_many:
    schema:
      type: object
      properties:
        items: {type: array, items: {type: object, properties: {order_id: {type: string}}}}
    records:
      order: {source: owners, kind: order, id_argument: "items[*].order_id"}
""",
        "/p.yaml",
    )
    schema = parameters(policy, "refund_many")
    assert list(schema["properties"]) == ["items"] and "required" not in schema


def test_a_path_binding_fills_the_enum_where_the_path_points_in_the_schemas_own_shape() -> None:
    """create_order's line items: the SKU set's members go into items.items.properties.sku, never into a
    top-level property named "items[*].sku"; the scoped payment methods are listed to no one."""
    policy = load_policy(EXAMPLE)
    skus = make_snapshot("catalog.skus", 1, ["SKU-A", "SKU-B"], received_at=0.0)
    countries = make_snapshot("geo.countries", 1, ["DE", "FR"], received_at=0.0)
    readings = {snapshot.name: SetReading(snapshot, 0.0, False) for snapshot in (skus, countries)}
    definition = export_tool(policy, policy.tools["create_order"], readings.get, "openai").definition
    schema = definition["function"]["parameters"]
    assert set(schema["properties"]) == {"items", "payment_method_id", "shipping"}
    line = schema["properties"]["items"]["items"]
    assert line["properties"]["sku"]["enum"] == ["SKU-A", "SKU-B"]
    assert line["properties"]["sku"]["type"] == "string"
    assert "sku" in line["required"]
    country = schema["properties"]["shipping"]["properties"]["country"]
    assert country["enum"] == ["DE", "FR"] and "required" not in schema["properties"]["shipping"]  # optional
    assert "enum" not in schema["properties"]["payment_method_id"]
    assert "caller's own values" in schema["properties"]["payment_method_id"]["description"]
    assert sorted(schema["required"]) == ["items", "payment_method_id"]


def test_a_nested_binding_without_a_schema_builds_the_shape_it_names() -> None:
    policy = parse_policy(
        b"""
sources: {local: {file: sets.yaml}}
value_sets: {skus: {source: local}}
tools:
  order:
    arguments: {"lines[*].sku": {value_set: skus}}
""",
        "/p.yaml",
    )
    schema = parameters(policy, "order")
    assert schema["properties"]["lines"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"sku": {"type": "string", "description": "Must be one of the values of skus."}},
            "required": ["sku"],
        },
    }


def test_two_paths_through_one_shared_definition_each_get_their_own_enum() -> None:
    policy = parse_policy(
        b"""
sources: {local: {file: sets.yaml}}
value_sets: {ship: {source: local}, bill: {source: local}}
tools:
  order:
    schema:
      type: object
      properties:
        shipping: {$ref: "#/$defs/Address"}
        billing: {$ref: "#/$defs/Address"}
        returns: {$ref: "#/$defs/Address"}
      $defs:
        Address: {type: object, properties: {country: {type: string}}}
    arguments:
      shipping.country: {value_set: ship, required: true}
      billing.country: {value_set: bill}
""",
        "/p.yaml",
    )
    sets = {
        name: SetReading(make_snapshot(name, 1, members, received_at=0.0), 0.0, False)
        for name, members in (("ship", ["DE", "FR"]), ("bill", ["GB", "US"]))
    }
    schema = export_tool(policy, policy.tools["order"], sets.get, "openai").definition["function"]["parameters"]
    properties = schema["properties"]
    assert properties["shipping"]["properties"]["country"]["enum"] == ["DE", "FR"]
    assert properties["shipping"]["required"] == ["country"]
    assert properties["billing"]["properties"]["country"]["enum"] == ["GB", "US"]
    assert "required" not in properties["billing"]
    assert properties["returns"] == {"$ref": "#/$defs/Address"}  # unbound: as the schema wrote it
    assert "enum" not in schema["$defs"]["Address"]["properties"]["country"]
