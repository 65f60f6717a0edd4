"""Issue 30.2: a shadow policy judges every live call too, never decides one, and its differences are counted.

A real gateway on loopback, its sets from a file source; the shadow set, read,
cleared and promoted through the Admin API as an operator would.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2

from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import admin_pb2, sources_pb2, sources_pb2_grpc
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on, loopback_settings
from tests.service.helpers import admin_status, admin_stub, eventually, gateway_stub, request, value
from tests.service.test_decision_log import unpacked_log

SETS = """
codes.v1: {version: 1, members: [A, B]}
codes.v2: {version: 1, members: [A, B, C]}
countries: {version: 1, members: [FR, DE]}
"""

LIVE = """
sources:
  local: {file: sets.yaml}
value_sets:
  codes.v1: {source: local}
  codes.v2: {source: local}
  countries: {source: local}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: codes.v1}
  add_note:
    mode: observe
    arguments:
      country: {value_set: countries}
  ship:
    mode: reject
    arguments:
      country: {value_set: countries}
"""

# refund_order takes codes.v2 (C newly allowed); add_note rejects (newly refuses); ship checks one more
# argument, whose values are redacted (the same refusal, another problem); any unknown tool is refused.
SHADOW = """
default_mode: reject
sources:
  local: {file: sets.yaml}
value_sets:
  codes.v1: {source: local}
  codes.v2: {source: local}
  countries: {source: local}
sampling:
  redact: [card_country]
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {value_set: codes.v2}
  add_note:
    mode: reject
    arguments:
      country: {value_set: countries}
  ship:
    mode: reject
    arguments:
      country: {value_set: countries}
      card_country: {value_set: countries}
"""


@pytest.fixture
async def gateway(tmp_path: Path):
    (tmp_path / "sets.yaml").write_text(SETS)
    running = await gateway_on(tmp_path, LIVE)
    try:
        yield running
    finally:
        await running.stop(0)


async def set_shadow(
    gateway: RunningGateway, text: str = SHADOW, reason: str = "CHG-7"
) -> admin_pb2.SetShadowPolicyResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.SetShadowPolicyResponse = await admin.SetShadowPolicy(
            admin_pb2.SetShadowPolicyRequest(policy_yaml=text.encode(), name="shadow.yaml", reason=reason), timeout=10
        )
    return response


async def shadow_report(gateway: RunningGateway) -> admin_pb2.GetShadowReportResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        found: admin_pb2.GetShadowReportResponse = await admin.GetShadowReport(
            admin_pb2.GetShadowReportRequest(), timeout=5
        )
    return found


def counts(report: admin_pb2.GetShadowReportResponse) -> dict[tuple[str, str], int]:
    return {(row.tool, row.kind): row.count for row in report.differences}


async def test_the_shadow_counts_what_it_would_decide_differently_and_never_decides(gateway: RunningGateway) -> None:
    set_response = await set_shadow(gateway)
    assert set_response.shadow_version and not set_response.previous_version
    assert value(gateway.registry, "argwatch_shadow_policy", version=set_response.shadow_version) == 1
    channel, stub = gateway_stub(gateway)
    async with channel:
        # Live refuses C; the shadow would allow it.
        refund = await stub.Validate(request("refund_order", {"reason_code": "C"}, call_id="r1"), timeout=5)
        assert refund.decision == pb.DECISION_REJECT
        # Live observes; the shadow would refuse.
        note = await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
        assert note.decision == pb.DECISION_ALLOW
        # Both refuse, on different problems; the redacted argument's value is never shown.
        ship = await stub.Validate(
            request("ship", {"country": "XX", "card_country": "secret-value"}, call_id="s1"), timeout=5
        )
        assert ship.decision == pb.DECISION_REJECT and len(ship.problems) == 1
        # A name no policy has: live observes it (default mode), the shadow refuses, under _unknown.
        unknown = await stub.Validate(request("made_up_tool_4711", {}, call_id="u1"), timeout=5)
        assert unknown.decision == pb.DECISION_ALLOW
        # The same verdict on both sides: judged, not a difference.
        same = await stub.Validate(request("refund_order", {"reason_code": "A"}, call_id="a1"), timeout=5)
        assert same.decision == pb.DECISION_ALLOW
    await eventually(lambda: gateway.shadow is not None and gateway.shadow.runner.in_flight == 0)
    report = await shadow_report(gateway)
    assert report.loaded and report.shadow_version == set_response.shadow_version and report.calls == 5
    assert counts(report) == {
        ("refund_order", "would_allow"): 1,
        ("add_note", "would_refuse"): 1,
        ("ship", "different_problems"): 1,
        ("_unknown", "would_refuse"): 1,
    }
    for tool, kind in counts(report):
        assert value(gateway.registry, "argwatch_shadow_differences_total", tool=tool, kind=kind) == 1
    assert value(gateway.registry, "argwatch_shadow_calls_total") == 5
    rows = {(row.tool, row.kind): row for row in report.differences}
    (shipped,) = rows["ship", "different_problems"].examples
    assert shipped.call_id == "s1" and shipped.live_decision == "reject" and shipped.shadow_decision == "reject"
    assert [(p.code, p.path) for p in shipped.live_problems] == [("out_of_set", "country")]
    assert {p.path: p.value for p in shipped.shadow_problems} == {"country": '"XX"', "card_country": "REDACTED"}
    (unknown_example,) = rows["_unknown", "would_refuse"].examples
    assert unknown_example.tool == "made_up_tool_4711"  # shown to on-call, never a label
    # Only label values from the policies in the metrics: no caller's tool name.
    assert not any(
        sample.labels.get("tool") == "made_up_tool_4711"
        for family in gateway.registry.collect()
        for sample in family.samples
    )
    # The live policy's own counters saw each call once: the shadow's judgments are counted elsewhere.
    assert value(gateway.registry, "argwatch_decisions_total", tool="add_note", mode="observe", decision="allow") == 1
    assert value(gateway.registry, "argwatch_decisions_total", tool="add_note", mode="reject", decision="reject") == 0
    status = await admin_status(gateway)  # what the TUI's top line reads
    assert (status.shadow_version, status.shadow_differences) == (set_response.shadow_version, 4)
    # The diff promotion would make.
    assert report.live_version == gateway.policy.version
    assert set(report.tools_changed) == {"refund_order", "add_note", "ship"}


async def test_examples_are_bounded_per_tool_and_kind_and_tools_per_label(gateway: RunningGateway) -> None:
    await set_shadow(gateway)
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index in range(8):
            await stub.Validate(request("add_note", {"country": "XX"}, call_id=f"n{index}"), timeout=5)
        for index in range(40):  # 40 distinct invented names: one row, one series
            await stub.Validate(request(f"invented_{index}", {}, call_id=f"u{index}"), timeout=5)
    await eventually(lambda: gateway.shadow is not None and gateway.shadow.runner.in_flight == 0)
    report = await shadow_report(gateway)
    rows = {(row.tool, row.kind): row for row in report.differences}
    assert rows["add_note", "would_refuse"].count == 8
    assert [e.call_id for e in rows["add_note", "would_refuse"].examples] == ["n7", "n6", "n5", "n4", "n3"]
    assert rows["_unknown", "would_refuse"].count == 40 and len(rows["_unknown", "would_refuse"].examples) == 5
    assert len(report.differences) == 2


async def test_set_and_clear_are_audited_with_actor_and_reason(gateway: RunningGateway) -> None:
    set_response = await set_shadow(gateway, reason="CHG-7 trying codes.v2")
    channel, admin = admin_stub(gateway)
    async with channel:
        cleared = await admin.ClearShadowPolicy(admin_pb2.ClearShadowPolicyRequest(reason="CHG-7 done"), timeout=5)
        assert cleared.shadow_version == set_response.shadow_version
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.ClearShadowPolicy(admin_pb2.ClearShadowPolicyRequest(reason=" "), timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        changes = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    shadow = [c for c in changes.changes if c.tool == "@shadow"]
    assert [(c.outcome, c.new_mode, c.old_mode) for c in shadow] == [
        ("cleared", "", set_response.shadow_version),
        ("set", set_response.shadow_version, ""),
    ]
    assert shadow[1].reason.startswith("CHG-7 trying codes.v2") and shadow[0].reason.startswith("CHG-7 done")
    assert all(c.actor for c in shadow)
    assert not (await shadow_report(gateway)).loaded
    assert not gateway.registry.get_sample_value("argwatch_shadow_policy", {"version": set_response.shadow_version})
    assert "validate" not in vars(gateway.validator)  # no shadow: Validate is not even wrapped


async def test_a_shadow_that_does_not_load_is_refused_and_the_live_policy_keeps_serving(
    gateway: RunningGateway,
) -> None:
    before = await set_shadow(gateway)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await set_shadow(gateway, "tools:\n  t:\n    arguments:\n      a: {value_set: nowhere}\n")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "nowhere" in (refused.value.details() or "") and "shadow.yaml" in (refused.value.details() or "")
    assert value(gateway.registry, "argwatch_shadow_failures_total", reason="load_failed") == 1
    # The shadow before it and the live policy both kept serving.
    assert (await shadow_report(gateway)).shadow_version == before.shadow_version
    channel, stub = gateway_stub(gateway)
    async with channel:
        answer = await stub.Validate(request("refund_order", {"reason_code": "C"}), timeout=5)
    assert answer.decision == pb.DECISION_REJECT and answer.policy_version == gateway.policy.version


async def test_serve_with_a_bad_shadow_file_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "policy.yaml").write_text(LIVE)
    (tmp_path / "shadow.yaml").write_text("tools: [not, a, mapping]\n")
    settings = dataclasses.replace(
        loopback_settings(str(tmp_path / "policy.yaml")), shadow_policy=str(tmp_path / "shadow.yaml")
    )
    with pytest.raises(ValueError, match=r"--shadow-policy: .*shadow\.yaml"):
        await build_gateway(settings)


async def test_serve_with_a_shadow_file_judges_from_the_start(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "shadow.yaml").write_text(SHADOW)
    gateway = await gateway_on(tmp_path, LIVE, shadow_policy=str(tmp_path / "shadow.yaml"))
    try:
        report = await shadow_report(gateway)
        assert report.loaded and report.name == str(tmp_path / "shadow.yaml")
    finally:
        await gateway.stop(0)


async def test_a_shadow_that_raises_is_counted_and_the_live_verdict_stands(gateway: RunningGateway, caplog) -> None:
    await set_shadow(gateway)
    assert gateway.shadow is not None and gateway.shadow.runner.judge is not None
    judge = gateway.shadow.runner.judge

    async def broken(call: ToolCall, deadline: float | None = None) -> Verdict:
        raise RuntimeError("a bug in the shadow's judgment")

    judge.validator.validate = broken  # type: ignore[method-assign]  # fault injection: a bug, in the shadow only
    channel, stub = gateway_stub(gateway)
    async with channel:
        for _ in range(3):
            answer = await stub.Validate(request("refund_order", {"reason_code": "C"}), timeout=5)
            assert answer.decision == pb.DECISION_REJECT and answer.problems[0].code == pb.PROBLEM_CODE_OUT_OF_SET
    await eventually(lambda: value(gateway.registry, "argwatch_shadow_failures_total", reason="raised") == 3)
    assert (await shadow_report(gateway)).raised == 3
    assert sum("the shadow policy raised" in r.getMessage() for r in caplog.records) == 1  # once a minute


async def test_promote_shows_the_diff_then_serves_the_shadow(gateway: RunningGateway) -> None:
    set_response = await set_shadow(gateway)
    previewed = await shadow_report(gateway)
    assert previewed.tools_changed and previewed.live_version != previewed.shadow_version
    channel, admin = admin_stub(gateway)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as stale:
            await admin.PromoteShadow(
                admin_pb2.PromoteShadowRequest(reason="CHG-7", shadow_version="000000000000"), timeout=10
            )
        assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        promoted = await admin.PromoteShadow(
            admin_pb2.PromoteShadowRequest(reason="CHG-7 go", shadow_version=previewed.shadow_version), timeout=10
        )
        assert promoted.outcome == "reloaded" and promoted.policy_version == set_response.shadow_version
        changes = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), timeout=5)
    assert gateway.policy.version == set_response.shadow_version
    assert not (await shadow_report(gateway)).loaded
    status = await admin_status(gateway)  # the screen says the policy in use is not the file's
    assert status.policy_promoted_from and status.policy_version == set_response.shadow_version
    reloads = [c for c in changes.changes if c.tool == "@policy"]
    assert reloads[0].reason.startswith("promoted from the shadow: CHG-7 go")
    channel, stub = gateway_stub(gateway)
    async with channel:
        answer = await stub.Validate(request("refund_order", {"reason_code": "C"}), timeout=5)
        assert answer.decision == pb.DECISION_ALLOW and answer.policy_version == set_response.shadow_version
    # The file was not written: a reload from it serves the live policy's file again.
    assert (await gateway.reload(reason="back to the file")).policy_version != set_response.shadow_version
    assert not (await admin_status(gateway)).policy_promoted_from


async def test_promote_without_a_shadow_is_refused(gateway: RunningGateway) -> None:
    channel, admin = admin_stub(gateway)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.PromoteShadow(admin_pb2.PromoteShadowRequest(reason="CHG-7"), timeout=5)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


class HeldRecords(sources_pb2_grpc.RecordSourceServicer):
    """A system of record that answers only once released: the shadow's look-ups stay in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def Lookup(self, request: sources_pb2.LookupRequest, context: object) -> sources_pb2.LookupResponse:
        await self.release.wait()
        attributes = struct_pb2.Struct()
        attributes.update({"customer_id": "cus_A"})
        return sources_pb2.LookupResponse(found=True, attributes=attributes)


async def test_shadow_work_in_flight_is_bounded_and_the_rest_counted_busy(tmp_path: Path) -> None:
    records = HeldRecords()
    server = grpc.aio.server()
    sources_pb2_grpc.add_RecordSourceServicer_to_server(records, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    live = "tools:\n  refund_order: {mode: observe}\n"
    shadow = f"""
sources:
  orders_db: {{grpc: {{target: "127.0.0.1:{port}", timeout: 5s}}}}
tools:
  refund_order:
    mode: reject
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, failure: closed}}
"""
    gateway = await gateway_on(tmp_path, live, shadow_max_in_flight=2)
    try:
        await set_shadow(gateway, shadow)
        channel, stub = gateway_stub(gateway)
        async with channel:
            for index in range(5):
                answer = await stub.Validate(request("refund_order", {"order_id": f"ord_{index}"}), timeout=5)
                assert answer.decision == pb.DECISION_ALLOW  # the live verdict, not waiting for the shadow
        assert gateway.shadow is not None and gateway.shadow.runner.in_flight == 2
        assert value(gateway.registry, "argwatch_shadow_failures_total", reason="busy") == 3
        records.release.set()
        await eventually(lambda: gateway.shadow is not None and gateway.shadow.runner.in_flight == 0)
        report = await shadow_report(gateway)
        assert report.busy == 3 and report.calls == 2
    finally:
        await gateway.stop(0)
        await server.stop(0)


ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789a"


async def test_only_the_admin_role_changes_the_shadow_and_the_read_role_reads_it(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "tokens.yaml").write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    (tmp_path / "tokens.yaml").chmod(0o600)
    gateway = await gateway_on(tmp_path, LIVE, admin_tokens=str(tmp_path / "tokens.yaml"))
    as_reader = (("authorization", f"Bearer {READER}"),)
    as_admin = (("authorization", f"Bearer {ADMIN}"),)
    wanted = admin_pb2.SetShadowPolicyRequest(policy_yaml=SHADOW.encode(), name="shadow.yaml", reason="CHG-7")
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            for metadata, code in (
                (None, grpc.StatusCode.UNAUTHENTICATED),
                (as_reader, grpc.StatusCode.PERMISSION_DENIED),
            ):
                for call in (
                    admin.SetShadowPolicy(wanted, metadata=metadata, timeout=5),
                    admin.ClearShadowPolicy(
                        admin_pb2.ClearShadowPolicyRequest(reason="x"), metadata=metadata, timeout=5
                    ),
                    admin.PromoteShadow(admin_pb2.PromoteShadowRequest(reason="x"), metadata=metadata, timeout=5),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await call
                    assert refused.value.code() == code
            with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
                await admin.GetShadowReport(admin_pb2.GetShadowReportRequest(), timeout=5)
            assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert not (await admin.GetShadowReport(admin_pb2.GetShadowReportRequest(), metadata=as_reader)).loaded
            await admin.SetShadowPolicy(wanted, metadata=as_admin, timeout=10)
            assert (await admin.GetShadowReport(admin_pb2.GetShadowReportRequest(), metadata=as_reader)).loaded
            changes = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(), metadata=as_admin, timeout=5)
        shadow = [c for c in changes.changes if c.tool == "@shadow"]
        assert [c.actor for c in shadow] == ["ana@oncall"]  # the read role's refusals are audited apart
        refusals = [c for c in changes.changes if c.actor == "grafana" and c.outcome.startswith("refused")]
        assert len(refusals) == 3
    finally:
        await gateway.stop(0)


async def test_on_call_overrides_apply_to_the_shadow_too(gateway: RunningGateway) -> None:
    """add_note observes live and rejects in the shadow: an on-call override to observe holds for both."""
    await set_shadow(gateway)
    channel, admin = admin_stub(gateway)
    async with channel:
        await admin.SetMode(admin_pb2.SetModeRequest(tool="add_note", mode=pb.MODE_OBSERVE, reason="INC-3"), timeout=5)
    channel, stub = gateway_stub(gateway)
    async with channel:
        await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
    assert gateway.shadow is not None
    await gateway.shadow.runner.drained()
    report = await shadow_report(gateway)
    assert report.calls == 1 and counts(report) == {}


async def test_a_reload_keeps_the_shadow_judging_and_the_decision_log_sees_live_verdicts_only(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    gateway = await gateway_on(tmp_path, LIVE, decision_log=str(tmp_path / "decisions"))
    try:
        await set_shadow(gateway)
        (tmp_path / "policy.yaml").write_text(
            LIVE.replace("add_note:\n    mode: observe", "add_note:\n    mode: observe\n    # edited")
        )
        assert (await gateway.reload(reason="an edit")).outcome == "reloaded"
        channel, stub = gateway_stub(gateway)
        async with channel:
            answer = await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
        assert answer.decision == pb.DECISION_ALLOW
        assert gateway.shadow is not None
        await gateway.shadow.runner.drained()
        assert counts(await shadow_report(gateway)) == {("add_note", "would_refuse"): 1}
    finally:
        await gateway.stop(0)
    lines = unpacked_log(tmp_path / "decisions").decode().splitlines()
    assert len(lines) == 1 and '"n1"' in lines[0] and '"allow"' in lines[0]


async def test_a_shadow_set_while_a_reload_builds_is_fed_by_the_reloaded_policy(tmp_path: Path) -> None:
    """The reload's Validator was built before the shadow was set: it is bound to the shadow at the swap."""
    (tmp_path / "sets.yaml").write_text(SETS)
    gateway = await gateway_on(tmp_path, LIVE)
    try:
        # The reloaded policy adds a set whose owner never answers: the reload waits for it while building.
        waiting = LIVE.replace(
            "  countries: {source: local}\n", "  countries: {source: local}\n  later: {source: silent}\n"
        ).replace(
            "  local: {file: sets.yaml}\n", '  local: {file: sets.yaml}\n  silent: {grpc: {target: "127.0.0.1:1"}}\n'
        )
        (tmp_path / "policy.yaml").write_text(waiting)
        reloading = asyncio.ensure_future(gateway.reload(reason="adds a set"))
        await eventually(lambda: gateway.reloader is not None and gateway.reloader._lock.locked())
        await set_shadow(gateway)
        assert (await reloading).outcome == "reloaded"
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
        assert gateway.shadow is not None
        await gateway.shadow.runner.drained()
        assert counts(await shadow_report(gateway)) == {("add_note", "would_refuse"): 1}
    finally:
        await gateway.stop(0)


async def test_report_lines_escape_what_the_caller_wrote(tmp_path: Path) -> None:
    """`argwatch shadow promote` prints the report, then asks y/N: an example's call id is the caller's, and
    must not erase the lines above it (ESC[3A ESC[J) or forge a row (a newline)."""
    from argwatch.server.cli.shadow_command import report_lines

    (tmp_path / "sets.yaml").write_text(SETS)
    gateway = await gateway_on(tmp_path, LIVE)
    try:
        await set_shadow(gateway, SHADOW)
        channel, stub = gateway_stub(gateway)
        async with channel:
            evil = "XX\x1b[3A\x1b[J  no call judged differently\n"
            await stub.Validate(request("add_note", {"country": "XX"}, call_id="s1" + evil), timeout=5)
        assert gateway.shadow is not None
        await gateway.shadow.runner.drained()
        lines = report_lines(await shadow_report(gateway))
    finally:
        await gateway.stop(0)
    assert not any("\x1b" in line or "\n" in line for line in lines)
    assert any("s1XX\\x1b[3A\\x1b[J" in line for line in lines)
