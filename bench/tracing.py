"""What tracing (serve --otlp-endpoint) adds to a Validate: the server's CPU per call with it and without, in one run.

One gateway process serves Validate twice, on one grpc.aio server and event
loop: traced (argwatch.v1.Gateway/Validate, a span per call exported over
OTLP/gRPC in batches) and untraced (the plain GatewayServicer on the same
Validator, as argwatch.bench.Untraced/Validate, behind the same admission
wrapper). The load generator alternates between them every 0.25 s and takes
the server process's CPU time per call in each window (the SDK's export thread
included), then the median over adjacent pairs of the difference and of the
ratio. The spans go to a real OTLP receiver in this (the load generator's)
process, which counts them. Each call carries a `traceparent`, as an
instrumented agent's would, on both sides.

    python bench/tracing.py                          # 1 and 16 in flight; 3 runs of 20 s
    python bench/tracing.py --seconds 5 --runs 1     # a quick look
    python bench/tracing.py --unsampled              # callers that sampled their trace out (flags 00)

Traffic goes to 127.0.0.1 only, and every run is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from prometheus_client import CollectorRegistry
from validate import HERE, VALIDATE_METHOD, Side, payload, server_cpu_seconds, window

UNTRACED_SERVICE = "argwatch.bench.Untraced"
UNTRACED_METHOD = f"/{UNTRACED_SERVICE}/Validate"


class _Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP TraceService that counts the spans it is sent."""

    def __init__(self) -> None:
        self.spans = 0

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans += sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


async def serve(policy: str, endpoint: str) -> None:
    """The server process: a traced gateway, and the same Validator untraced beside it. Prints its port."""
    from bench_server import bench_settings

    from argwatch.server.edge.admission import Admission, Limits
    from argwatch.server.edge.gateway_service import GatewayServicer, _admitted
    from argwatch.server.process.app import build_gateway
    from argwatch.server.telemetry.tallies import TallyHistogram

    # The untraced servicer exists before the gateway (its handler is registered while the server is built);
    # it is handed the gateway's Validator once there is one, as a reload hands a new one.
    untraced_seconds = TallyHistogram("untraced_seconds", "Validate untraced", (0.001, 0.01, 0.1), CollectorRegistry())
    untraced = GatewayServicer(None, None, observe_seconds=untraced_seconds.observe)  # type: ignore[arg-type]
    admission = Admission(Limits(1000, 250, 250), lambda reason: None, lambda count: None)

    def add_untraced(server: grpc.aio.Server) -> list[str]:
        handler = grpc.unary_unary_rpc_method_handler(_admitted(admission, untraced.Validate))
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(UNTRACED_SERVICE, {"Validate": handler}),)
        )
        return []

    settings = dataclasses.replace(bench_settings(policy), otlp_endpoint=endpoint)
    gateway = await build_gateway(settings, extra_services=add_untraced)
    untraced.use(gateway.validator)
    gc.freeze()  # as `argwatch serve` does
    print(gateway.port, flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    threading.Thread(target=_wait_for_eof, args=(loop, stopping), daemon=True).start()
    await stopping.wait()
    await gateway.stop(1.0)


def _wait_for_eof(loop: asyncio.AbstractEventLoop, stopping: asyncio.Event) -> None:
    while sys.stdin.buffer.read(65536):
        pass
    loop.call_soon_threadsafe(stopping.set)


async def one_run(target: str, pid: int, in_flight: int, seconds: float, sampled: bool) -> dict[str, Any]:
    body = payload()
    # The caller's sampling decision is followed (the SDK's default sampler): flags 01 exports every span,
    # 00 none, which leaves what tracing costs a call that is not sampled.
    flags = "01" if sampled else "00"
    metadata = (("traceparent", f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-{flags}"),)
    channels = [grpc.aio.insecure_channel(target) for _ in range(min(4, in_flight))]
    index = 0

    def caller(method: str):  # type: ignore[no-untyped-def]
        calls = [channel.unary_unary(method) for channel in channels]

        async def call(request: bytes, deadline: float) -> bytes:
            nonlocal index
            index += 1
            return await calls[index % len(calls)](request, timeout=deadline, metadata=metadata)  # type: ignore[no-any-return]

        return call

    traced, untraced = caller(VALIDATE_METHOD), caller(UNTRACED_METHOD)
    sides = {"traced": Side(), "untraced": Side()}
    cpu: dict[str, list[float]] = {"traced": [], "untraced": []}  # per window: µs of server CPU per call
    for _ in range(4):  # warm up both paths
        await window(traced, body, in_flight, Side())
        await window(untraced, body, in_flight, Side())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, call in (("traced", traced), ("untraced", untraced)):
            calls_before, before = sides[name].calls, server_cpu_seconds(pid)
            await window(call, body, in_flight, sides[name])
            spent = server_cpu_seconds(pid) - before
            sides[name].cpu_seconds += spent
            cpu[name].append(1e6 * spent / max(1, sides[name].calls - calls_before))
    for channel in channels:
        await channel.close()
    added = [t - u for t, u in zip(cpu["traced"], cpu["untraced"], strict=False)]
    ratios = [t / u for t, u in zip(cpu["traced"], cpu["untraced"], strict=False) if u]
    return {
        "in_flight": in_flight,
        "traced": sides["traced"].summary(),
        "untraced": sides["untraced"].summary(),
        "added_cpu_us_per_call_median_of_pairs": statistics.median(added),
        "cpu_ratio_median_of_pairs": statistics.median(ratios),
        "pairs": len(added),
    }


async def measure(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    receiver = _Receiver()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    receiver_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    process = subprocess.Popen(  # noqa: ASYNC220 (started once, before any measuring)
        [sys.executable, __file__, "--serve", f"127.0.0.1:{receiver_port}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    port = (await asyncio.to_thread(process.stdout.readline)).strip()
    if not port.isdigit():
        process.kill()
        raise SystemExit("the bench server did not start")
    results = []
    try:
        for in_flight in arguments.in_flight:
            runs = [
                await one_run(f"127.0.0.1:{port}", process.pid, in_flight, arguments.seconds, not arguments.unsampled)
                for _ in range(arguments.runs)
            ]
            added = statistics.median(run["added_cpu_us_per_call_median_of_pairs"] for run in runs)
            ratio = statistics.median(run["cpu_ratio_median_of_pairs"] for run in runs)
            untraced = statistics.median(run["untraced"]["server_cpu_us_per_call"] for run in runs)
            traced = statistics.median(run["traced"]["server_cpu_us_per_call"] for run in runs)
            print(
                f"{in_flight:>3} in flight: server CPU per Validate untraced {untraced:.1f} µs, "
                f"traced {traced:.1f} µs; added {added:+.1f} µs (median of pairs), ratio {ratio:.3f}",
                flush=True,
            )
            results.append({"in_flight": in_flight, "runs": runs, "added_us": added, "ratio": ratio})
    finally:
        process.stdin.close()
        await asyncio.to_thread(process.wait, 30)
        await server.stop(None)
    print(f"spans received by the OTLP receiver: {receiver.spans}")
    return results


def parts(calls: int = 5000) -> dict[str, float]:
    """Microseconds of each part of a traced call, in this process, the best of 5 runs: reading the caller's
    `traceparent`, the event loop's share of a span (ids, times, its encoding, the queue), and the export
    thread's share, a request of 512 spans; beside them, the definitions in Python (a dict of attributes and
    otlp_encoding), as the export thread ran them before, and the same span through the OpenTelemetry SDK
    (made, given its attributes, ended; then its OTLP encoding): what argwatch's own export replaced."""
    from time import time_ns

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from argwatch.server.policy.model import Mode
    from argwatch.server.tracing import otlp_encoding
    from argwatch.server.tracing._otlp import export_request as native_export_request
    from argwatch.server.tracing._otlp import traceparent as native_traceparent
    from argwatch.server.tracing.span_export import new_span_id
    from argwatch.server.tracing.trace_context import Parent, parse_parent
    from argwatch.server.tracing.traced_gateway import _VALIDATE, judged_span, verdict_attributes
    from argwatch.server.verdict.decision import Decision, Verdict
    from argwatch.server.verdict.tool_call import ToolCall

    traceparent = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    parent = parse_parent(traceparent)
    assert parent is not None
    call = ToolCall(
        "refund_order", {}, "call-0a1b2c3d4e5f60718293a4b5c6d7e8f9", conversation_id="conv-5f1c0d6e9a7b4c3d"
    )
    verdict = Verdict(call.call_id, Decision.ALLOW, Mode.OBSERVE, (), (), (), "0123456789ab")
    queued: list[bytes] = []

    def loop_share() -> None:
        start = time_ns()
        encoded = judged_span(_VALIDATE, parent, parent.trace_id, new_span_id(), start, time_ns(), call, verdict)
        if len(queued) < 512:
            queued.append(encoded)

    ended: list[ReadableSpan] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if len(ended) < 512:
                ended.append(span)

    provider = TracerProvider()
    provider.add_span_processor(Keep())
    tracer = provider.get_tracer("bench")
    propagator = TraceContextTextMapPropagator()
    sdk_parent = propagator.extract({"traceparent": traceparent})
    rpc = {"rpc.system": "grpc", "rpc.service": "argwatch.v1.Gateway", "rpc.method": "Validate"}

    def sdk_span() -> None:
        made = tracer.start_span("argwatch.Validate", sdk_parent, SpanKind.SERVER, rpc)
        made.set_attributes(verdict_attributes(call, verdict))
        made.end()

    def best(run: Any, count: int) -> float:
        fastest = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(count):
                run()
            fastest = min(fastest, time.perf_counter() - started)
        return fastest / count * 1e6

    found = {
        "read_traceparent_us": best(lambda: parse_parent(traceparent), calls),
        "native_read_traceparent_us": best(lambda: Parent(*native_traceparent(traceparent, "", 512)), calls),  # type: ignore[misc]
        "loop_share_us": best(loop_share, calls),
    }
    resource, scope = otlp_encoding.request_head({"service.name": "argwatch"}, "argwatch.server")
    found["request_per_span_us"] = best(lambda: native_export_request(resource, scope, queued), 50) / len(queued)
    found["python_request_per_span_us"] = best(lambda: otlp_encoding.export_request(resource, scope, queued), 5) / len(
        queued
    )

    def in_python() -> bytes:  # the definitions (a dict, otlp_encoding's span), in Python throughout
        start = time_ns()
        return otlp_encoding.span(
            _VALIDATE,
            bytes.fromhex(parent.trace_id),
            new_span_id().to_bytes(8, "big"),
            bytes.fromhex(parent.span_id),
            parent.trace_state,
            start,
            time_ns(),
            verdict_attributes(call, verdict),
            "",
        )

    found["python_span_and_request_per_span_us"] = best(
        lambda: otlp_encoding.export_request(resource, scope, [in_python() for _ in queued]), 5
    ) / len(queued)
    found["sdk_read_traceparent_us"] = best(lambda: propagator.extract({"traceparent": traceparent}), calls)
    found["sdk_span_us"] = best(sdk_span, calls)
    found["sdk_encoding_per_span_us"] = best(lambda: encode_spans(ended).SerializeToString(), 5) / len(ended)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=20.0, help="per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument(
        "--unsampled", action="store_true", help="callers send traceparent flags 00: spans made, none sampled or sent"
    )
    parser.add_argument("--serve", metavar="OTLP_ENDPOINT", help=argparse.SUPPRESS)  # the server process
    arguments = parser.parse_args()
    if arguments.serve:
        asyncio.run(serve(os.path.join(HERE, "policy.yaml"), arguments.serve))
        return 0
    results: list[dict[str, Any]] = asyncio.run(measure(arguments))
    costs = parts()
    print("in-process parts (best of 5): " + ", ".join(f"{name} {value:.1f}" for name, value in costs.items()))
    results.append({"parts": costs})
    os.makedirs(arguments.out, exist_ok=True)
    path = os.path.join(arguments.out, f"tracing-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as handle:
        json.dump({"machine": platform.platform(), "cpus": os.cpu_count(), "results": results}, handle, indent=2)
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
