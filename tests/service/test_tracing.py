"""Traces on a real gateway, exported over OTLP/gRPC to a real receiver on loopback: each Validate, stream
message and Repair is a span in the caller's trace (the parent it sent), with the call's and the verdict's
attributes; the client passes the current context on; the latency histogram's exemplars name the trace;
the decision log goes out as log records; and without the flag nothing of OpenTelemetry is loaded."""

from __future__ import annotations

import ast
import asyncio
import collections
import secrets
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace import TracerProvider

from argwatch.client import Gateway, Session, from_openai
from argwatch.server.decisions.writer import DecisionLogWriter
from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway
from argwatch.server.tracing import log_export
from argwatch.server.tracing.trace_context import parse_parent
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import gateway_pb2
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request
from tests.service.otlp_receiver import OtlpReceiver, attributes
from tests.service.test_decision_log import unpacked_log

POLICY = textwrap.dedent(
    """
    default_mode: reject
    sources:
      local: {file: sets.yaml}
    value_sets:
      wms.warehouses: {source: local}
    tools:
      transfer_stock:
        arguments:
          warehouse_code: {value_set: wms.warehouses}
    """
)
SETS = "wms.warehouses:\n  version: 3\n  members: [AMS-1, FRA-2]\n"


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OtlpReceiver]:
    # The SDK's batch delays (read from the standard variables when its processors are made): short, so the
    # spans arrive while the test waits rather than seconds later.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "50")
    found = OtlpReceiver()
    await found.start()
    yield found
    await found.stop()


async def _traced_gateway(folder: Path, receiver: OtlpReceiver, **settings: Any) -> RunningGateway:
    (folder / "sets.yaml").write_text(SETS)
    return await gateway_on(folder, POLICY, otlp_endpoint=receiver.endpoint, **settings)


def _caller() -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A caller's trace id and span id (hex), and the metadata that carries them."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, (("traceparent", f"00-{trace_id}-{span_id}-01"), ("tracestate", "vendor=agent"))


def _written(gateway: RunningGateway) -> int:
    writer = gateway.decisions
    assert isinstance(writer, DecisionLogWriter)
    return writer.written


def _one(receiver: OtlpReceiver, name: str, call_id: str) -> Span | None:
    found = [span for span in receiver.named(name) if attributes(span).get("gen_ai.tool.call.id") == call_id]
    return found[0] if found else None


async def test_validate_and_repair_are_spans_in_the_callers_trace_with_the_verdict(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    trace_id, parent_id, metadata = _caller()
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            bad = request("transfer_stock", {"warehouse_code": "AMS-9"}, conversation="conv-7", call_id="call-1")
            verdict = await stub.Validate(bad, metadata=metadata, timeout=5)
            assert verdict.call_id == "call-1"
            await stub.Repair(
                gateway_pb2.RepairRequest(call_id="call-1", conversation_id="conv-7"), metadata=metadata, timeout=5
            )
            good = request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="call-2")
            await stub.Validate(good, metadata=metadata, timeout=5)
        await eventually(
            lambda: all(
                _one(receiver, name, call_id) is not None
                for name, call_id in (
                    ("argwatch.Validate", "call-1"),
                    ("argwatch.Repair", "call-1"),
                    ("argwatch.Validate", "call-2"),
                )
            )
        )
    finally:
        await gateway.stop()
    rejected, repair, allowed = (
        _one(receiver, "argwatch.Validate", "call-1"),
        _one(receiver, "argwatch.Repair", "call-1"),
        _one(receiver, "argwatch.Validate", "call-2"),
    )
    assert rejected is not None and repair is not None and allowed is not None
    for span in (rejected, repair, allowed):
        assert span.trace_id.hex() == trace_id and span.parent_span_id.hex() == parent_id  # the caller's span
        assert span.kind == Span.SPAN_KIND_SERVER
        assert span.trace_state == "vendor=agent"
    assert attributes(rejected) == {
        "rpc.system": "grpc",
        "rpc.service": "argwatch.v1.Gateway",
        "rpc.method": "Validate",
        "gen_ai.tool.name": "transfer_stock",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.conversation.id": "conv-7",
        "argwatch.decision": "reject",
        "argwatch.mode": "reject",
        "argwatch.problem_count": 1,
        "argwatch.problem_codes": ["out_of_set"],
        "argwatch.policy_version": gateway.policy.version,
    }
    assert attributes(allowed)["argwatch.decision"] == "allow" and attributes(allowed)["argwatch.problem_count"] == 0
    assert "gen_ai.conversation.id" not in attributes(allowed)  # none sent, none made up
    shown = attributes(repair)
    assert shown["gen_ai.conversation.id"] == "conv-7" and shown["argwatch.problem_count"] == 1
    assert shown["argwatch.repair.attempt"] == 1 and shown["rpc.method"] == "Repair"


async def test_spans_go_out_in_full_batches_while_calls_keep_coming(receiver: OtlpReceiver) -> None:
    """Spans queued while an export is under way wait for a full batch (or the delay, or the stop): sending them
    as they came made ever smaller exports under load, and each export's cost was then paid per few spans."""
    from argwatch.server.tracing.span_export import BATCH, SpanExport, new_span_id
    from argwatch.server.tracing.traced_gateway import _VALIDATE, judged_span

    parent = parse_parent(f"00-{'1' * 32}-{'2' * 16}-01")
    assert parent is not None
    call = ToolCall("transfer_stock", {}, "c-1")
    verdict = Verdict("c-1", Decision.ALLOW, Mode.OBSERVE, (), (), (), "v1")

    def offer(export: SpanExport, count: int) -> None:
        for _ in range(count):
            export.offer(judged_span(_VALIDATE, parent, parent.trace_id, new_span_id(), 1, 2, call, verdict))

    export = SpanExport(grpc.insecure_channel(receiver.endpoint), {"service.name": "t"}, "t", delay_seconds=60)
    try:
        receiver.span_exports_open.clear()
        offer(export, BATCH)  # a full batch: sent at once, and held by the collector
        await eventually(lambda: export._queue == collections.deque())
        offer(export, 100)  # arrive while the export is under way
        receiver.span_exports_open.set()
        await eventually(lambda: receiver.span_exports == [BATCH])
        await asyncio.sleep(0.3)
        assert receiver.span_exports == [BATCH]  # the 100 wait for a batch (the delay is a minute)
        offer(export, BATCH - 100)
        await eventually(lambda: receiver.span_exports == [BATCH, BATCH])
        offer(export, 30)
    finally:
        await asyncio.to_thread(export.close)
    assert receiver.span_exports == [BATCH, BATCH, 30]  # the rest at the stop
    assert len(receiver.spans) == 2 * BATCH + 30


async def test_a_malformed_traceparent_starts_a_new_trace_and_the_call_is_answered(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n, bad in enumerate(("00-not-a-trace", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", "ff-x-y-z")):
                good = request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"odd-{n}")
                verdict = await stub.Validate(good, metadata=(("traceparent", bad),), timeout=5)
                assert verdict.call_id == f"odd-{n}"
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="none"), timeout=5)
        await eventually(lambda: len(receiver.named("argwatch.Validate")) == 4)
    finally:
        await gateway.stop()
    for span in receiver.named("argwatch.Validate"):
        assert span.parent_span_id == b"" and len(span.trace_id) == 16 and any(span.trace_id)  # a root of its own
    assert len({span.trace_id for span in receiver.named("argwatch.Validate")}) == 4


async def test_a_caller_that_sampled_its_trace_out_gets_no_span_and_a_refused_request_an_error_span(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    trace_id, parent_id, _ = _caller()
    unsampled = (("traceparent", f"00-{trace_id}-{parent_id}-00"),)
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            good = request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="not-sampled")
            assert (await stub.Validate(good, metadata=unsampled, timeout=5)).call_id == "not-sampled"
            validate: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                "/argwatch.v1.Gateway/Validate"
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await validate(b"\xff\xff not a request", timeout=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="after"), timeout=5)
        await eventually(lambda: _one(receiver, "argwatch.Validate", "after") is not None)
        assert len(receiver.named("argwatch.Validate")) == 2
        assert gateway.registry.get_sample_value("argwatch_trace_spans_dropped_total", {"reason": "full"}) == 0
    finally:
        await gateway.stop()
    assert _one(receiver, "argwatch.Validate", "not-sampled") is None
    (failed,) = [span for span in receiver.named("argwatch.Validate") if "gen_ai.tool.call.id" not in attributes(span)]
    assert failed.status.code == Status.STATUS_CODE_ERROR and failed.status.message == "AbortError"
    assert failed.parent_span_id == b""


async def test_with_no_collector_listening_calls_are_answered_spans_counted_as_lost_and_stop_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    closed = OtlpReceiver()  # started and stopped at once: a loopback port with nothing behind it
    endpoint = await closed.start()
    await closed.stop()
    (tmp_path / "sets.yaml").write_text(SETS)
    gateway = await gateway_on(tmp_path, POLICY, otlp_endpoint=endpoint)
    lost = {"reason": "export_error"}
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(3):
                good = request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"lost-{n}")
                assert (await stub.Validate(good, timeout=5)).call_id == f"lost-{n}"
        await eventually(lambda: gateway.registry.get_sample_value("argwatch_trace_spans_dropped_total", lost) == 3)
    finally:
        await asyncio.wait_for(gateway.stop(), 30)


async def test_past_the_queue_spans_are_dropped_and_counted_and_every_call_is_answered(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two spans may wait and the export waits a minute: the other three calls' spans are counted as dropped
    (`full`) before they are encoded, and the two that waited go out at the stop."""
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(5):
                good = request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"q-{n}")
                assert (await stub.Validate(good, timeout=5)).call_id == f"q-{n}"
        full = {"reason": "full"}
        assert gateway.registry.get_sample_value("argwatch_trace_spans_dropped_total", full) == 3
        assert receiver.named("argwatch.Validate") == []
    finally:
        await gateway.stop()
    assert sorted(attributes(span)["gen_ai.tool.call.id"] for span in receiver.named("argwatch.Validate")) == [
        "q-0",
        "q-1",
    ]


async def test_a_sample_ratio_of_zero_traces_no_call_without_a_traceparent_and_every_sampled_callers(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    _, _, metadata = _caller()
    gateway = await _traced_gateway(tmp_path, receiver, otlp_sample_ratio=0.0)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(5):
                await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"r-{n}"), timeout=5)
            await stub.Validate(
                request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="joined"), metadata=metadata, timeout=5
            )
        await eventually(lambda: _one(receiver, "argwatch.Validate", "joined") is not None)
    finally:
        await gateway.stop()
    assert [attributes(span)["gen_ai.tool.call.id"] for span in receiver.spans] == ["joined"]


async def test_each_stream_message_is_a_span_under_the_context_the_stream_was_opened_with(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    trace_id, parent_id, metadata = _caller()
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            stream = stub.ValidateStream(metadata=metadata, timeout=5)
            for n, code in enumerate(("AMS-1", "XXX", "FRA-2")):
                await stream.write(request("transfer_stock", {"warehouse_code": code}, call_id=f"s-{n}"))
                answer = await stream.read()
                assert answer.call_id == f"s-{n}"
            await stream.done_writing()
        await eventually(lambda: len(receiver.named("argwatch.ValidateStream")) == 3)
    finally:
        await gateway.stop()
    spans = sorted(receiver.named("argwatch.ValidateStream"), key=lambda span: span.start_time_unix_nano)
    assert [attributes(span)["gen_ai.tool.call.id"] for span in spans] == ["s-0", "s-1", "s-2"]
    assert [attributes(span)["argwatch.decision"] for span in spans] == ["allow", "reject", "allow"]
    assert {(span.trace_id.hex(), span.parent_span_id.hex()) for span in spans} == {(trace_id, parent_id)}


async def test_the_client_passes_the_current_span_on_so_the_gateways_span_is_its_child(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    agent = TracerProvider().get_tracer("agent")  # the agent's own SDK, not the gateway's
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        async with Gateway(gateway.target) as client:
            with agent.start_as_current_span("agent.step") as step:
                outcome = await client.check(
                    from_openai(
                        {
                            "id": "from-client",
                            "type": "function",
                            "function": {"name": "transfer_stock", "arguments": '{"warehouse_code": "AMS-9"}'},
                        }
                    ),
                    Session(conversation_id="conv-c"),
                )
            assert not outcome.go_ahead and outcome.tool_error  # rejected: Repair was asked too, inside the same span
        await eventually(
            lambda: (
                _one(receiver, "argwatch.Validate", "from-client") is not None
                and _one(receiver, "argwatch.Repair", "from-client") is not None
            )
        )
    finally:
        await gateway.stop()
    step_context = step.get_span_context()
    for name in ("argwatch.Validate", "argwatch.Repair"):
        span = _one(receiver, name, "from-client")
        assert span is not None
        assert int.from_bytes(span.trace_id) == step_context.trace_id
        assert int.from_bytes(span.parent_span_id) == step_context.span_id


async def test_the_latency_histograms_exemplar_names_the_trace_in_the_openmetrics_format(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    trace_id, _, metadata = _caller()
    gateway = await _traced_gateway(tmp_path, receiver)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), metadata=metadata, timeout=5)
        openmetrics = await _scrape(gateway.metrics_port, "application/openmetrics-text; version=1.0.0")
        plain = await _scrape(gateway.metrics_port, "text/plain")
    finally:
        await gateway.stop()
    buckets = [line for line in openmetrics.splitlines() if line.startswith("argwatch_validate_seconds_bucket")]
    assert buckets, openmetrics[:2000]
    assert any(f'# {{trace_id="{trace_id}"}}' in line for line in buckets), buckets
    assert "trace_id" not in plain  # the Prometheus text format has no exemplars


async def test_the_decision_log_goes_out_as_otlp_log_records_as_well_as_to_its_files(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    folder = tmp_path / "decisions"
    gateway = await _traced_gateway(tmp_path, receiver, decision_log=str(folder), decision_log_otlp=True)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n, code in enumerate(("AMS-1", "AMS-9")):
                call = request("transfer_stock", {"warehouse_code": code}, conversation="conv-l", call_id=f"l-{n}")
                await stub.Validate(call, timeout=5)
        await eventually(lambda: len(receiver.logs) == 2)
    finally:
        await gateway.stop()
    files = unpacked_log(folder).splitlines()
    records = sorted(receiver.logs, key=lambda record: attributes(record)["gen_ai.tool.call.id"])
    assert [orjson.loads(record.body.string_value) for record in records] == [orjson.loads(line) for line in files]
    shown = attributes(records[1])
    assert shown["gen_ai.tool.name"] == "transfer_stock" and shown["gen_ai.conversation.id"] == "conv-l"
    assert shown["argwatch.decision"] == "reject" and shown["argwatch.problem_count"] == 1
    assert records[1].event_name == "argwatch.decision"
    assert records[1].time_unix_nano // 10**6 == int(orjson.loads(files[1])["ts"] * 1000)
    assert (
        gateway.registry.get_sample_value("argwatch_decision_log_dropped_total", {"reason": "otlp_queue_full"}) == 0.0
    )


async def test_log_records_past_the_queue_while_the_collector_is_slow_are_dropped_and_counted(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The SDK's queue drops silently when full; the gateway's own bound in front of it counts each line it
    drops, the file keeps every line, and what was queued arrives once the collector answers."""
    folder = tmp_path / "decisions"
    receiver.log_exports_open.clear()
    gateway = await _traced_gateway(
        tmp_path, receiver, decision_log=str(folder), decision_log_otlp=True, decision_log_queue=4
    )
    dropped = {"reason": "otlp_queue_full"}
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(20):
                # One at a time, each line written before the next call: the writer's own queue never fills.
                await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"q-{n}"), timeout=5)
                await eventually(lambda: _written(gateway) == n + 1)  # noqa: B023 (awaited within the iteration)
        assert gateway.registry.get_sample_value("argwatch_decision_log_dropped_total", dropped) == 16
        receiver.log_exports_open.set()
        await eventually(lambda: len(receiver.logs) == 4)
    finally:
        await gateway.stop()
    assert len(unpacked_log(folder).splitlines()) == 20
    assert [attributes(record)["gen_ai.tool.call.id"] for record in receiver.logs] == [f"q-{n}" for n in range(4)]


async def test_log_records_waiting_for_a_hung_collector_are_bounded_in_bytes_too(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many lines the queue may hold, the bytes waiting for a collector that does not answer stay
    within QUEUE_BYTES: past it a line is dropped and counted, and the file keeps it."""
    monkeypatch.setattr(log_export, "QUEUE_BYTES", 2_000)  # about three lines
    folder = tmp_path / "decisions"
    receiver.log_exports_open.clear()
    gateway = await _traced_gateway(
        tmp_path, receiver, decision_log=str(folder), decision_log_otlp=True, decision_log_queue=1_000
    )
    dropped = {"reason": "otlp_queue_full"}
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(10):
                await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"q-{n}"), timeout=5)
                await eventually(lambda: _written(gateway) == n + 1)  # noqa: B023 (awaited within the iteration)
        kept = 10 - int(gateway.registry.get_sample_value("argwatch_decision_log_dropped_total", dropped) or 0)
        assert 1 <= kept < 10
        receiver.log_exports_open.set()
        await eventually(lambda: len(receiver.logs) == kept)
    finally:
        await gateway.stop()
    assert len(unpacked_log(folder).splitlines()) == 10
    assert [attributes(record)["gen_ai.tool.call.id"] for record in receiver.logs] == [f"q-{n}" for n in range(kept)]


# Run in a subprocess before the gateway's modules load: every import of an `opentelemetry` module is noted with
# the module that asked for it (the nearest frame outside the import machinery and OpenTelemetry itself).
_WATCH_IMPORTS = """
import sys, importlib.abc
asked = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            frame = sys._getframe(1)
            while frame is not None:
                module = frame.f_globals.get("__name__", "")
                if not module.startswith(("importlib", "_frozen_importlib", "opentelemetry")) and module != __name__:
                    break
                frame = frame.f_back
            asked.append((name, frame.f_globals.get("__name__", "") if frame is not None else "?"))
        return None
sys.meta_path.insert(0, Watch())
"""


@pytest.mark.parametrize("installed", [True, False], ids=["extra-installed", "extra-missing"])
def test_without_the_flag_a_gateway_serves_and_argwatch_imports_nothing_of_opentelemetry(
    tmp_path: Path, installed: bool
) -> None:
    """The gateway's modules, a gateway built, started, answering a call and stopped: argwatch asks for no
    `opentelemetry` module, with the extra installed or not. (With it installed, redis-py 8 loads
    opentelemetry.sdk.metrics itself when imported, whatever argwatch does: that is not counted here.)"""
    (tmp_path / "sets.yaml").write_text(SETS)
    missing = "" if installed else "sys.modules['opentelemetry'] = None  # as if argwatch[otel] were not installed"
    code = _WATCH_IMPORTS + textwrap.dedent(
        f"""
        import asyncio
        {missing}
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        import argwatch.server.cli, argwatch.server.process.app
        from tests.conftest import gateway_on
        from tests.service.helpers import gateway_stub, request

        async def main():
            gateway = await gateway_on({str(tmp_path)!r}, {POLICY!r})
            channel, stub = gateway_stub(gateway)
            async with channel:
                answer = await stub.Validate(request("transfer_stock", {{"warehouse_code": "AMS-1"}}), timeout=5)
            assert answer.decision == 1, answer
            await gateway.stop()

        asyncio.run(main())
        print(repr((asked, sorted(sys.modules))))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60).stdout
    asked, modules = ast.literal_eval(out.strip().splitlines()[-1])
    assert "argwatch.server.edge.gateway_service" in modules and "argwatch.server.validator" in modules
    assert not [module for module in modules if module.startswith("argwatch.server.tracing")]
    by_argwatch = [(name, importer) for name, importer in asked if not importer.startswith("redis")]
    assert by_argwatch == []
    if installed:  # the watch works: it saw redis-py's own imports (if this redis-py stops making them, drop this)
        assert any(importer.startswith("redis") for _, importer in asked)


def test_the_flag_without_the_extra_refuses_to_start_saying_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "policy.yaml").write_text(POLICY)
    code = (
        "import sys; sys.modules['opentelemetry'] = None  # as if argwatch[otel] were not installed\n"
        "from argwatch.server.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "serve",
            "--policy",
            str(tmp_path / "policy.yaml"),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--otlp-endpoint",
            "127.0.0.1:4317",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "install argwatch[otel]" in done.stderr


async def _scrape(port: int, accept: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n".encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer.decode().partition("\r\n\r\n")[2]
