"""Issue 18.4: the policy is reloaded without a restart (Admin.ReloadPolicy here; SIGHUP in tests/e2e).

Before, a policy change needed a restart, and SIGHUP killed the process. A
reload swaps the whole policy at once, or refuses a policy that does not load
and keeps serving the last good one, saying why.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import orjson
import pytest
from google.protobuf import struct_pb2

from argwatch.server.policy.model import GrpcSourceConfig
from argwatch.server.process.app import RunningGateway
from argwatch.server.records.lookup_client import RecordClient
from argwatch.v1 import admin_pb2, sources_pb2, sources_pb2_grpc
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request

SETS = """
codes.v1: {version: 1, members: [A, B]}
codes.v2: {version: 1, members: [A, B, C]}
old.set: {version: 1, members: [X]}
"""

BEFORE = """
sources:
  local: {file: sets.yaml}
value_sets:
  codes.v1: {source: local}
  codes.v2: {source: local}
  old.set: {source: local}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: codes.v1}
  old_tool:
    mode: reject
    arguments:
      x: {value_set: old.set}
"""

# refund_order's argument is rebound to codes.v2, new_tool is added, old_tool and old.set are gone.
AFTER = """
sources:
  local: {file: sets.yaml}
value_sets:
  codes.v1: {source: local}
  codes.v2: {source: local}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: codes.v2}
  new_tool:
    mode: reject
    arguments:
      y: {value_set: codes.v2}
"""


@pytest.fixture
async def gateway(tmp_path: Path):
    (tmp_path / "sets.yaml").write_text(SETS)
    running = await gateway_on(tmp_path, BEFORE)
    try:
        yield running
    finally:
        await running.stop(0)


async def reload(gateway: RunningGateway, reason: str = "CHG-42") -> admin_pb2.ReloadPolicyResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.ReloadPolicyResponse = await admin.ReloadPolicy(
            admin_pb2.ReloadPolicyRequest(reason=reason), metadata=(("x-argwatch-actor", "ana@oncall"),), timeout=10
        )
    return response


async def verdict(gateway: RunningGateway, tool: str, args: dict[str, object]) -> pb.ValidateResponse:
    channel, stub = gateway_stub(gateway)
    async with channel:
        found: pb.ValidateResponse = await stub.Validate(request(tool, args), timeout=5)
    return found


def sample(gateway: RunningGateway, name: str, **labels: str) -> float | None:
    return gateway.registry.get_sample_value(name, labels)


async def test_a_reload_adds_a_tool_rebinds_an_argument_and_drops_a_removed_tools_series(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    before = gateway.policy.version
    assert (await verdict(gateway, "refund_order", {"reason_code": "C"})).decision == pb.DECISION_REJECT
    assert (await verdict(gateway, "old_tool", {"x": "X"})).decision == pb.DECISION_ALLOW
    assert sample(gateway, "argwatch_decisions_total", tool="old_tool", mode="reject", decision="allow") == 1
    (tmp_path / "policy.yaml").write_text(AFTER)

    response = await reload(gateway)

    after = gateway.policy.version
    assert after != before
    assert (response.outcome, response.previous_version, response.policy_version) == ("reloaded", before, after)
    assert (list(response.tools_added), list(response.tools_removed), list(response.tools_changed)) == (
        ["new_tool"],
        ["old_tool"],
        ["refund_order"],
    )
    # The rebound argument checks against its new set; the new tool is checked, the removed one is unknown.
    assert (await verdict(gateway, "refund_order", {"reason_code": "C"})).decision == pb.DECISION_ALLOW
    new_tool = await verdict(gateway, "new_tool", {"y": "Z"})
    assert new_tool.decision == pb.DECISION_REJECT and new_tool.problems[0].code == pb.PROBLEM_CODE_OUT_OF_SET
    gone = await verdict(gateway, "old_tool", {"x": "X"})
    assert [p.code for p in gone.problems] == [pb.PROBLEM_CODE_UNKNOWN_TOOL]
    # Metrics: the new tool's series from 0, the removed tool's and set's gone, the policy version served.
    assert sample(gateway, "argwatch_decisions_total", tool="new_tool", mode="observe", decision="allow") == 0
    assert sample(gateway, "argwatch_decisions_total", tool="old_tool", mode="reject", decision="allow") is None
    assert sample(gateway, "argwatch_mode", tool="old_tool") is None
    assert sample(gateway, "argwatch_mode", tool="new_tool") == 1
    assert sample(gateway, "argwatch_value_set_version", set="old.set") is None
    assert sample(gateway, "argwatch_value_set_version", set="codes.v2") == 1
    assert sample(gateway, "argwatch_policy", version=after) == 1
    assert sample(gateway, "argwatch_policy", version=before) is None
    assert sample(gateway, "argwatch_policy_reloads_total", result="reloaded") == 1
    # The Admin API serves the new policy, and the audit says who reloaded what.
    now = await admin_status(gateway)
    assert now.policy_version == after and now.policy_reload_error == ""
    assert [t.tool for t in now.tools] == ["refund_order", "new_tool", "_unknown"]
    assert [s.name for s in now.value_sets] == ["codes.v1", "codes.v2"]
    (entry, *_) = gateway.modes.changes()
    assert (entry.target, entry.actor, entry.old, entry.new, entry.outcome) == (
        "@policy",
        "ana@oncall",
        before,
        after,
        "reloaded",
    )
    assert entry.reason.startswith("CHG-42")


async def test_a_broken_policy_is_refused_the_last_good_one_serves_and_the_reason_is_shown(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    before = gateway.policy.version
    for broken, said in [
        ("tools: [\n", "not valid YAML"),
        (BEFORE.replace("{value_set: codes.v1}", "{value_set: codes.v9}"), "codes.v9"),
    ]:
        (tmp_path / "policy.yaml").write_text(broken)
        response = await reload(gateway, "CHG-43")
        assert response.outcome.startswith("refused: ") and said in response.outcome
        assert response.policy_version == before
        assert gateway.policy.version == before
        rejected = await verdict(gateway, "refund_order", {"reason_code": "C"})
        assert rejected.decision == pb.DECISION_REJECT and rejected.policy_version == before
        now = await admin_status(gateway)
        assert now.policy_version == before and said in now.policy_reload_error
        assert now.policy_reload_error_at.seconds > 0
    assert sample(gateway, "argwatch_policy_reloads_total", result="refused") == 2
    refused = [c for c in gateway.modes.changes() if c.target == "@policy"]
    assert len(refused) == 2 and all(c.outcome.startswith("refused: ") for c in refused)
    # The file put back as it was: "unchanged", and the refusal is over.
    (tmp_path / "policy.yaml").write_text(BEFORE)
    assert (await reload(gateway)).outcome == "unchanged"
    assert (await admin_status(gateway)).policy_reload_error == ""
    # A new policy fixed: the next reload takes it.
    (tmp_path / "policy.yaml").write_text(AFTER)
    assert (await reload(gateway)).outcome == "reloaded"
    assert (await admin_status(gateway)).policy_reload_error == ""


async def test_reloading_the_same_file_changes_nothing_and_says_so(gateway: RunningGateway) -> None:
    provider = gateway.provider
    response = await reload(gateway)
    assert (response.outcome, response.policy_version) == ("unchanged", gateway.policy.version)
    assert gateway.provider is provider


async def test_a_reload_needs_a_reason(gateway: RunningGateway) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await reload(gateway, reason=" ")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


class SlowRecords(sources_pb2_grpc.RecordSourceServicer):
    """A system of record that answers after `delay`: a look-up in flight while the policy is reloaded."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = asyncio.Event()

    async def Lookup(self, request: sources_pb2.LookupRequest, context: object) -> sources_pb2.LookupResponse:
        self.started.set()
        await asyncio.sleep(self.delay)
        attributes = struct_pb2.Struct()
        attributes.update({"customer_id": "cus_A"})
        return sources_pb2.LookupResponse(found=True, attributes=attributes)

    async def LookupBatch(
        self, request: sources_pb2.LookupBatchRequest, context: object
    ) -> sources_pb2.LookupBatchResponse:
        answers = [
            await self.Lookup(sources_pb2.LookupRequest(kind=request.kind, id=one), context) for one in request.ids
        ]
        return sources_pb2.LookupBatchResponse(records=answers)


# A grace of 0 closes the old record clients at the swap, with the look-up still in flight: it ends on its own
# (CI once caught it cut, and its call unanswered until the caller's deadline).
@pytest.mark.parametrize("grace_seconds", [1.0, 0.0])
async def test_a_call_in_flight_finishes_on_the_policy_it_started_on(tmp_path: Path, grace_seconds: float) -> None:
    records = SlowRecords(delay=1.0)
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(records, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    with_records = f"""
sources:
  orders_db: {{grpc: {{target: "127.0.0.1:{port}", timeout: 5s}}}}
tools:
  refund_order:
    mode: reject
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, failure: closed}}
"""
    gateway = await gateway_on(tmp_path, with_records, grace_seconds=grace_seconds)
    try:
        before = gateway.policy.version
        channel, stub = gateway_stub(gateway)
        async with channel:
            call = request("refund_order", {"order_id": "ord_1"})
            call.session.customer_id = "cus_A"
            in_flight = asyncio.ensure_future(stub.Validate(call, timeout=10))
            await records.started.wait()
            (tmp_path / "policy.yaml").write_text("tools:\n  other_tool: {mode: observe}\n")
            assert (await reload(gateway)).outcome == "reloaded"
            finished = await in_flight
            # Judged whole by the policy it started on: its look-up ran, and the tool was known.
            assert finished.policy_version == before
            assert finished.decision == pb.DECISION_ALLOW and not finished.problems
            after = await stub.Validate(request("refund_order", {"order_id": "ord_1"}), timeout=5)
            assert [p.code for p in after.problems] == [pb.PROBLEM_CODE_UNKNOWN_TOOL]
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_a_reload_with_saved_copies_keeps_the_copies_it_carries(tmp_path: Path) -> None:
    """With --snapshot-dir, the reloaded provider loaded the saved copies over the ones it carried: a set
    saved two hours ago (it had not changed since), its source down at the reload, turned unavailable
    (older than max_staleness), though this replica had it confirmed a moment before."""
    from tests.service.scripted_source import ScriptedSource, serve

    owner = ScriptedSource({"s.codes": sources_pb2.ValueSet(name="s.codes", version=5, members=["A", "B"])})
    server, target = await serve(owner)
    text = f"""
sources:
  owner: {{grpc: {{target: "{target}", timeout: 1s}}}}
value_sets:
  s.codes: {{source: owner, ttl: 5m, max_staleness: 1h}}
tools:
  pick:
    mode: reject
    arguments:
      code: {{value_set: s.codes}}
"""
    saved = tmp_path / "saved"
    gateway = await gateway_on(tmp_path, text, snapshot_dir=str(saved))
    try:

        async def saved_once() -> bool:
            return (saved / "s.codes.json").exists()

        await eventually(saved_once)
        copy = orjson.loads((saved / "s.codes.json").read_bytes())
        copy["confirmed_at"] -= 7200  # saved when version 5 arrived, two hours ago
        (saved / "s.codes.json").write_bytes(orjson.dumps(copy))
        await server.stop(0)  # the owner is down during the reload
        (tmp_path / "policy.yaml").write_text(text + "  other_tool: {mode: observe}\n")
        assert (await reload(gateway)).outcome == "reloaded"
        (held,) = (await admin_status(gateway)).value_sets
        assert held.available and held.age_seconds < 60, held
        assert (await verdict(gateway, "pick", {"code": "A"})).decision == pb.DECISION_ALLOW
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_a_removed_source_stops_reporting_and_an_edited_definitions_file_is_a_new_policy(
    tmp_path: Path,
) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "more.yaml").write_text("old.set: {version: 1, members: [X]}\n")
    (tmp_path / "tools.json").write_text(
        '{"tools": [{"name": "old_tool", "description": "d", "inputSchema": {"type": "object"}}]}'
    )
    before = (
        BEFORE.replace("  old.set: {source: local}", "  old.set: {source: more}")
        .replace("  local: {file: sets.yaml}", "  local: {file: sets.yaml}\n  more: {file: more.yaml}")
        .replace("sources:", "tool_definitions: [tools.json]\nsources:")
    )
    gateway = await gateway_on(tmp_path, before)
    try:
        assert sample(gateway, "argwatch_source_connected", source="more") == 1
        # The same policy file, another schema in the definitions it imports: not "unchanged".
        (tmp_path / "tools.json").write_text(
            '{"tools": [{"name": "old_tool", "description": "d", "inputSchema": {"type": "object", '
            '"properties": {"x": {"type": "string"}}, "required": ["x"]}}]}'
        )
        changed = await reload(gateway)
        assert changed.outcome == "reloaded" and changed.tools_changed == ["old_tool"]
        missing = await verdict(gateway, "old_tool", {})
        assert [p.code for p in missing.problems] == [pb.PROBLEM_CODE_MISSING_REQUIRED]
        (tmp_path / "policy.yaml").write_text(AFTER)
        assert (await reload(gateway)).outcome == "reloaded"
        assert sample(gateway, "argwatch_source_connected", source="more") is None  # it would alert forever
        assert sample(gateway, "argwatch_source_connected", source="local") == 1
    finally:
        await gateway.stop(0)


WITH_SCHEMAS = """
sources:
  local: {file: sets.yaml}
value_sets:
  codes.v1: {source: local}
tools:
  refund_order:
    mode: reject
    schema: {type: object, properties: {reason_code: {type: string}, cents: {type: integer, const: 1}}}
    arguments:
      reason_code: {value_set: codes.v1}
  note:
    schema: {type: object, properties: {text: {type: string, maxLength: 10}}}
"""


async def test_a_reload_reuses_what_an_unchanged_tool_compiled_and_counts_on(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    (tmp_path / "policy.yaml").write_text(WITH_SCHEMAS)
    assert (await reload(gateway)).outcome == "reloaded"
    compiled = {name: tool.schema_validator for name, tool in gateway.policy.tools.items()}
    assert (await verdict(gateway, "refund_order", {"reason_code": "A", "cents": 1})).decision == pb.DECISION_ALLOW
    # `note` changes; refund_order's schema is written again, as it was. Then 1.0 for 1: equal in Python
    # (1 == 1.0), another schema in JSON Schema's eyes, so compiled anew.
    (tmp_path / "policy.yaml").write_text(WITH_SCHEMAS.replace("maxLength: 10", "maxLength: 12") + "\n")
    assert list((await reload(gateway)).tools_changed) == ["note"]
    assert gateway.policy.tools["refund_order"].schema_validator is compiled["refund_order"]
    assert gateway.policy.tools["note"].schema_validator is not compiled["note"]
    (tmp_path / "policy.yaml").write_text(WITH_SCHEMAS.replace("const: 1}", "const: 1.0}"))
    assert list((await reload(gateway)).tools_changed) == ["refund_order", "note"]
    assert gateway.policy.tools["refund_order"].schema_validator is not compiled["refund_order"]
    wrong = await verdict(gateway, "refund_order", {"reason_code": "A", "cents": 2})
    assert wrong.decision == pb.DECISION_REJECT and [p.argument for p in wrong.problems] == ["cents"]
    # The counts carried on: refund_order's allow and reject in one series, each counted once.
    assert sample(gateway, "argwatch_decisions_total", tool="refund_order", mode="reject", decision="allow") == 1
    assert sample(gateway, "argwatch_decisions_total", tool="refund_order", mode="reject", decision="reject") == 1


async def test_a_tool_removed_then_added_back_counts_from_zero_in_series_that_exist(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    assert (await verdict(gateway, "old_tool", {"x": "X"})).decision == pb.DECISION_ALLOW
    (tmp_path / "policy.yaml").write_text(AFTER)
    assert (await reload(gateway)).outcome == "reloaded"
    assert sample(gateway, "argwatch_decisions_total", tool="old_tool", mode="reject", decision="allow") is None
    (tmp_path / "policy.yaml").write_text(BEFORE)
    assert (await reload(gateway)).outcome == "reloaded"
    assert sample(gateway, "argwatch_decisions_total", tool="old_tool", mode="reject", decision="allow") == 0
    assert (await verdict(gateway, "old_tool", {"x": "X"})).decision == pb.DECISION_ALLOW
    assert sample(gateway, "argwatch_decisions_total", tool="old_tool", mode="reject", decision="allow") == 1
    assert sample(gateway, "argwatch_mode", tool="old_tool") == 1


@pytest.mark.parametrize("batch", [False, True])
async def test_a_look_up_whose_channel_is_closed_under_it_is_unavailable_not_unanswered(batch: bool) -> None:
    """Closed at once (as at shutdown, or past the retire's grace), the channel cuts the look-up: it answers
    unavailable, so its check is a problem, where gRPC's CancelledError once ended the call's handler."""
    records = SlowRecords(delay=30.0)
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(records, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = RecordClient(GrpcSourceConfig(target=f"127.0.0.1:{port}", timeout_seconds=30.0), ttl=5.0)
    try:
        ids = ["ord_1", "ord_2"] if batch else ["ord_1"]
        asking = asyncio.ensure_future(client.lookup_many("order", ids, deadline=None))
        await records.started.wait()
        await client.close()
        async with asyncio.timeout(5):
            answers = await asking
        assert [answer.available for answer in answers] == [False] * len(ids)
        assert "channel was closed" in answers[0].error and not client.answering
        # A look-up asked after the close is cut the same way.
        assert not (await client.lookup("order", "ord_3", deadline=None)).available
    finally:
        await client.close()
        await server.stop(0)
