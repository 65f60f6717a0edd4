"""OpenTelemetry for one gateway: spans exported over OTLP/gRPC by a thread of their own (span_export.py), and,
with --decision-log-otlp, the decision log's lines through the SDK's logs pipeline; both shut down (flushed)
when the gateway stops.

Spans do not go through the SDK's tracer: its span object and its encoder cost
more than a call's whole budget (docs/performance.md, `tracing.py`). The
resource is still the SDK's, so the standard variables apply:
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; OTEL_BSP_SCHEDULE_DELAY and
OTEL_BSP_MAX_QUEUE_SIZE for the spans' batches, as the SDK reads them; the
logs pipeline reads OTEL_BLRP_* and OTEL_EXPORTER_OTLP_*. Nothing is
installed as OpenTelemetry's global providers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.util.types import AttributeValue
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from argwatch.server.edge.admission import Admission
from argwatch.server.edge.gateway_service import GatewayServicer
from argwatch.server.tracing.log_export import DecisionLogExport
from argwatch.server.tracing.span_export import SpanExport
from argwatch.server.tracing.traced_gateway import TracedGatewayServicer
from argwatch.server.validator import Validator

SCOPE = "argwatch.server"


@dataclass(frozen=True, slots=True)
class OtlpTarget:
    """Where the collector listens: `HOST:PORT` or `http://HOST:PORT` in plaintext, `https://HOST:PORT` in TLS
    (the system's roots)."""

    address: str
    tls: bool

    @classmethod
    def parse(cls, endpoint: str) -> OtlpTarget:
        scheme, found, rest = endpoint.partition("://")
        return cls(rest, scheme == "https") if found else cls(endpoint, False)

    def channel(self) -> grpc.Channel:
        if self.tls:
            return grpc.secure_channel(self.address, grpc.ssl_channel_credentials())
        return grpc.insecure_channel(self.address)


class Tracing:
    """The gateway's span export and, when the decision log goes out too, its log export; `shutdown` once at stop."""

    def __init__(
        self,
        endpoint: str,
        replica_id: str,
        registry: CollectorRegistry,
        *,
        sample_ratio: float = 1.0,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._sample_ratio = sample_ratio
        self._target = OtlpTarget.parse(endpoint)
        self._resource = _resource(replica_id)
        delay_ms = float(environ.get("OTEL_BSP_SCHEDULE_DELAY") or 5000)
        queue = int(environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or 2048)
        resource: dict[str, AttributeValue] = dict(self._resource.attributes)
        self.spans = SpanExport(self._target.channel(), resource, SCOPE, queue=queue, delay_seconds=delay_ms / 1000)
        registry.register(_SpansDropped(self.spans))
        self._loggers: LoggerProvider | None = None

    def gateway_servicer(
        self, validator: Validator, admission: Admission, observe_traced: Callable[[float, str], None], **options: Any
    ) -> GatewayServicer:
        """The Gateway servicer whose calls are spans (`options`: GatewayServicer's keyword arguments)."""
        return TracedGatewayServicer(
            validator,
            admission,
            spans=self.spans,
            observe_traced=observe_traced,
            sample_ratio=self._sample_ratio,
            **options,
        )

    def decision_log_export(self, queue: int, dropped: Callable[[str], None]) -> DecisionLogExport:
        """The decision log's lines as OTLP log records, at most `queue` waiting for export (more are dropped
        and counted through `dropped`)."""
        self._loggers = LoggerProvider(resource=self._resource)
        exporter = OTLPLogExporter(endpoint=self._target.address, insecure=not self._target.tls)
        return DecisionLogExport(self._loggers, exporter, queue, dropped)

    def shutdown(self) -> None:
        """Exports what is waiting (within the export timeout) and stops the export threads. Blocking: call it
        off the event loop."""
        if self._loggers is not None:
            self._loggers.shutdown()
        self.spans.close()


class _SpansDropped(Collector):
    """argwatch_trace_spans_dropped_total{reason}: spans not exported, read from the export at scrape time."""

    def __init__(self, spans: SpanExport) -> None:
        self._spans = spans

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "argwatch_trace_spans_dropped_total",
            "Spans not exported: the queue was full, or the collector did not take their batch",
            labels=["reason"],
        )
        for reason, count in list(self._spans.dropped.items()):
            family.add_metric([reason], count)
        yield family


def _resource(replica_id: str) -> Resource:
    """service.name "argwatch" unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names it; the replica as
    service.instance.id."""
    found = Resource.create({SERVICE_INSTANCE_ID: replica_id})
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "argwatch"}))
    return found
