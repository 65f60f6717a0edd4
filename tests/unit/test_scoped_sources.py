"""Scoped sets as sources hand them over: the file's `scopes:` and the wire's ScopeMembers become scope keys."""

from __future__ import annotations

import pytest

from argwatch.server.replay.sets_export import _entry
from argwatch.server.sets.payload import Retirement, SetPayload, SourceUnavailable
from argwatch.server.sets.scoped import scope_key
from argwatch.server.sets.updates import UpdateAction, judge_delta
from argwatch.server.valuesets.file_source import parse_sets
from argwatch.server.valuesets.grpc_source import _PartAssembler, delta_from_wire, payload_from_wire
from argwatch.server.valuesets.parts import ScopeKeys
from argwatch.sources import ValueSetCatalog
from argwatch.sources._scoped_sets import scope_parts
from argwatch.sources._value_sets import to_wire
from argwatch.v1 import sources_pb2
from tests.snapshots import make_snapshot


def test_a_file_publishes_a_scoped_set_per_scope_with_its_retired_values_per_scope() -> None:
    sets = parse_sets(
        {
            "billing.payment_methods": {
                "version": 4,
                "scopes": {"cus_a": ["pm_1", "pm_2"], "cus_b": ["pm_3"]},
                "retired": [{"scope": "cus_a", "value": "pm_0", "replaced_by": "pm_1"}],
            }
        },
        "sets.yaml",
        0,
    )
    payload = sets["billing.payment_methods"]
    assert payload.scoped
    assert payload.members == (scope_key("cus_a", "pm_1"), scope_key("cus_a", "pm_2"), scope_key("cus_b", "pm_3"))
    assert payload.retirements[scope_key("cus_a", "pm_0")].replaced_by == "pm_1"


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"members": ["X"], "scopes": {"a": ["X"]}}, "not both"),
        ({"scopes": ["X"]}, "expected a mapping of each scope to its members"),
        ({"scopes": {"": ["X"]}}, "'' is no scope"),
        ({"scopes": {"a\x00b": ["X"]}}, "is no scope"),
        ({"scopes": {"a": ["X"]}, "retired": ["Y"]}, "with a usable scope"),
    ],
)
def test_a_malformed_scoped_set_in_a_file_is_refused_naming_why(entry: dict[str, object], error: str) -> None:
    with pytest.raises(SourceUnavailable, match=error):
        parse_sets({"s": entry}, "sets.yaml", 0)


def test_scope_keys_are_made_a_slice_at_a_time_and_an_unusable_scope_reads_as_the_empty_one() -> None:
    keys = ScopeKeys([("cus_a", ["1", "2"]), ("cus_b", []), ("cus_c", ["3"]), ("bad\x00", ["4"])])
    assert len(keys) == 4
    assert keys[1:3] == [scope_key("cus_a", "2"), scope_key("cus_c", "3")]
    assert keys[3] == scope_key("", "4")
    assert list(keys) == [scope_key("cus_a", "1"), scope_key("cus_a", "2"), scope_key("cus_c", "3"), "\x004"]


def test_a_wire_snapshot_per_scope_is_a_scoped_payload_with_retired_values_per_scope() -> None:
    wire = sources_pb2.ValueSet(
        name="s",
        version=2,
        scopes=[sources_pb2.ScopeMembers(scope="cus_a", members=["pm_1"])],
        retired_values=[sources_pb2.RetiredValue(value="pm_0", scope="cus_a", replaced_by="pm_1")],
    )
    payload = payload_from_wire(wire, "s")
    assert payload.scoped and list(payload.members) == [scope_key("cus_a", "pm_1")]
    assert dict(payload.retirements.items())[scope_key("cus_a", "pm_0")].replaced_by == "pm_1"
    mixed = payload_from_wire(sources_pb2.ValueSet(name="s", members=["X"], scopes=wire.scopes), "s")
    assert not mixed.scoped  # refused by a scoped set (scope_mismatch) and read as no scope's


def test_a_scoped_delta_is_keyed_per_scope_and_bare_values_beside_it_are_refused() -> None:
    current = make_snapshot("s", 1, [scope_key("cus_a", "pm_1")], received_at=0.0, scoped=True)
    wire = sources_pb2.ValueSetDelta(
        name="s",
        from_version=1,
        to_version=2,
        scoped_added=[sources_pb2.ScopeMembers(scope="cus_a", members=["pm_2"])],
        scoped_removed=[sources_pb2.ScopeMembers(scope="cus_a", members=["pm_1"], replaced_by={"pm_1": "pm_2"})],
    )
    delta = delta_from_wire(wire)
    assert delta.scoped and delta.added == (scope_key("cus_a", "pm_2"),)
    assert dict(delta.replaced_by) == {scope_key("cus_a", "pm_1"): "pm_2"}
    assert judge_delta(delta, current, 100).action is UpdateAction.APPLY
    wire.added.append("pm_9")
    assert judge_delta(delta_from_wire(wire), current, 100).reason == "bad_scope"


def test_an_owner_publishes_per_scope_and_each_change_is_a_delta_of_that_scope_alone() -> None:
    catalog = ValueSetCatalog()
    catalog.publish("s", members_by_scope={"cus_a": ["pm_1"], "cus_b": ["pm_2"]})
    queue = catalog.subscribe()
    published = catalog.publish_scope("s", "cus_a", ["pm_3"], replaced_by={"pm_1": "pm_3"})
    assert published.version == 2 and published.scoped is not None
    assert dict(published.scoped.members) == {"cus_a": frozenset({"pm_3"}), "cus_b": frozenset({"pm_2"})}
    announced = queue.get_nowait()
    assert isinstance(announced, sources_pb2.WatchValueSetsResponse)
    delta = announced.delta
    assert [(e.scope, list(e.members)) for e in delta.scoped_added] == [("cus_a", ["pm_3"])]
    assert [(e.scope, list(e.members), dict(e.replaced_by)) for e in delta.scoped_removed] == [
        ("cus_a", ["pm_1"], {"pm_1": "pm_3"})
    ]
    wire = to_wire(published)
    assert [(v.scope, v.value, v.replaced_by) for v in wire.retired_values] == [("cus_a", "pm_1", "pm_3")]
    whole = catalog.publish("s", members_by_scope={"cus_b": ["pm_2"]})  # cus_a left out: emptied
    assert whole.scoped is not None and set(whole.scoped.members) == {"cus_b"}
    announced = queue.get_nowait()
    assert isinstance(announced, sources_pb2.WatchValueSetsResponse)
    assert [(e.scope, list(e.members)) for e in announced.delta.scoped_removed] == [("cus_a", ["pm_3"])]


@pytest.mark.parametrize("scope", ["", "a\x00b", "c" * 257])
def test_an_owner_cannot_publish_a_scope_a_gateway_would_refuse(scope: str) -> None:
    with pytest.raises(ValueError, match="is no scope"):
        ValueSetCatalog().publish_scope("s", scope, ["pm_1"])


def test_a_set_is_global_or_scoped_for_its_life_in_a_catalog() -> None:
    catalog = ValueSetCatalog()
    catalog.publish("g", ["A"])
    catalog.publish_scope("s", "cus_a", ["pm_1"])
    with pytest.raises(ValueError, match="published as a global set"):
        catalog.publish_scope("g", "cus_a", ["A"])
    with pytest.raises(ValueError, match="published per scope"):
        catalog.publish("s", ["pm_1"])


def test_a_large_scoped_snapshot_sent_in_parts_is_joined_back_per_scope() -> None:
    catalog = ValueSetCatalog()
    published = catalog.publish("s", members_by_scope={"cus_a": ["1", "2", "3"], "cus_b": ["4"], "cus_c": ["5"]})
    assert published.scoped is not None
    parts = scope_parts(published.scoped, 2)  # a scope split across two parts, as large sets are
    assert [[(e.scope, list(e.members)) for e in part] for part in parts] == [
        [("cus_a", ["1", "2"])],
        [("cus_a", ["3"]), ("cus_b", ["4"])],
        [("cus_c", ["5"])],
    ]
    assembler = _PartAssembler(None)
    whole = None
    for index, part in enumerate(parts):
        whole = assembler.add(sources_pb2.ValueSet(name="s", version=1, scopes=part, part=index, parts=len(parts)))
    assert isinstance(whole, SetPayload) and whole.scoped
    assert list(whole.members) == [
        scope_key(s, v) for s, v in [("cus_a", "1"), ("cus_a", "2"), ("cus_a", "3"), ("cus_b", "4"), ("cus_c", "5")]
    ]


def test_a_scoped_set_exported_to_a_file_reads_back_per_scope() -> None:
    """`argwatch sets export` writes a scoped set in the file source's scoped form, never as bare members."""
    keys = [scope_key("cus_a", "pm_2"), scope_key("cus_a", "pm_1"), scope_key("cus_b", "pm_3")]
    retired = {scope_key("cus_a", "pm_0"): Retirement(None, "pm_1")}
    snapshot = make_snapshot("s", 3, keys, received_at=0.0, scoped=True, retirements=retired)
    entry = _entry(snapshot)
    assert entry["scopes"] == {"cus_a": ["pm_1", "pm_2"], "cus_b": ["pm_3"]}
    payload = parse_sets({"s": entry}, "sets.json", 0)["s"]
    assert payload.scoped and sorted(payload.members) == sorted(keys)
    assert payload.retirements[scope_key("cus_a", "pm_0")].replaced_by == "pm_1"
