"""A real OTLP receiver for tests: opentelemetry-proto's TraceService and LogsService on loopback, keeping what
arrives (what an OpenTelemetry collector would receive from the gateway)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, into: list[Span], sizes: list[int], gate: asyncio.Event) -> None:
        self._into = into
        self._sizes = sizes
        self._gate = gate

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        await self._gate.wait()  # a collector that takes its time
        size = 0
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self._into.extend(scope.spans)
                size += len(scope.spans)
        self._sizes.append(size)
        return trace_service_pb2.ExportTraceServiceResponse()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, into: list[LogRecord], gate: asyncio.Event) -> None:
        self._into = into
        self._gate = gate

    async def Export(
        self, request: logs_service_pb2.ExportLogsServiceRequest, context: Any
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        await self._gate.wait()  # a collector that takes its time (`hold_logs`)
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                self._into.extend(scope.log_records)
        return logs_service_pb2.ExportLogsServiceResponse()


class OtlpReceiver:
    """Started with `start()` on 127.0.0.1:0; `spans` and `logs` fill as exports arrive; `stop()` at the end.
    `span_exports` has each trace export's count of spans. Clearing `log_exports_open` (`span_exports_open`)
    holds every logs (trace) export unanswered until it is set again."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.logs: list[LogRecord] = []
        self.span_exports: list[int] = []
        self.span_exports_open = asyncio.Event()
        self.span_exports_open.set()
        self.log_exports_open = asyncio.Event()
        self.log_exports_open.set()
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            _Traces(self.spans, self.span_exports, self.span_exports_open), self._server
        )  # type: ignore[no-untyped-call]
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(self.logs, self.log_exports_open), self._server)  # type: ignore[no-untyped-call]
        self.endpoint = ""

    async def start(self) -> str:
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.endpoint = f"127.0.0.1:{port}"
        return self.endpoint

    async def stop(self) -> None:
        self.log_exports_open.set()
        self.span_exports_open.set()
        await self._server.stop(None)

    def named(self, name: str) -> list[Span]:
        return [span for span in self.spans if span.name == name]


def attributes(item: Any) -> dict[str, Any]:
    """A span's, a log record's or a resource's attributes as plain values."""
    return {kv.key: plain(kv.value) for kv in item.attributes}


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None
