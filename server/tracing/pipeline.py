"""The OpenTelemetry SDK set up for one gateway: spans (and, with --decision-log-otlp, log records) exported
over OTLP/gRPC in batches by the SDK's own threads, flushed and shut down when the gateway stops.

The providers are the gateway's own, never installed as OpenTelemetry's global
ones: an application embedding the gateway (or a test running several) keeps
its own. The SDK reads the standard environment where argwatch sets nothing:
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER (default:
the caller's sampling decision, else every span), OTEL_BSP_* and OTEL_BLRP_*
for the batches, OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE and _TIMEOUT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from argwatch.server.edge.admission import Admission
from argwatch.server.edge.gateway_service import GatewayServicer
from argwatch.server.tracing.log_export import DecisionLogExport
from argwatch.server.tracing.traced_gateway import TracedGatewayServicer
from argwatch.server.validator import Validator

SCOPE = "argwatch.server"


@dataclass(frozen=True, slots=True)
class OtlpTarget:
    """Where the collector listens: `HOST:PORT` or `http://HOST:PORT` in plaintext, `https://HOST:PORT` in TLS
    (the system's roots, or OTEL_EXPORTER_OTLP_CERTIFICATE)."""

    address: str
    tls: bool

    @classmethod
    def parse(cls, endpoint: str) -> OtlpTarget:
        scheme, found, rest = endpoint.partition("://")
        return cls(rest, scheme == "https") if found else cls(endpoint, False)


class Tracing:
    """The gateway's tracer and, when the decision log goes out too, its log export; `shutdown` once at stop."""

    def __init__(self, endpoint: str, replica_id: str) -> None:
        self._target = OtlpTarget.parse(endpoint)
        self._resource = _resource(replica_id)
        self._tracers = TracerProvider(resource=self._resource)
        self._tracers.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=self._target.address, insecure=not self._target.tls))
        )
        self.tracer: Tracer = self._tracers.get_tracer(SCOPE)
        self._loggers: LoggerProvider | None = None

    def gateway_servicer(
        self, validator: Validator, admission: Admission, observe_traced: Callable[[float, str], None], **options: Any
    ) -> GatewayServicer:
        """The Gateway servicer whose calls are spans (`options`: GatewayServicer's keyword arguments)."""
        return TracedGatewayServicer(validator, admission, tracer=self.tracer, observe_traced=observe_traced, **options)

    def decision_log_export(self, queue: int, dropped: Callable[[str], None]) -> DecisionLogExport:
        """The decision log's lines as OTLP log records, at most `queue` waiting for export (more are dropped
        and counted through `dropped`)."""
        self._loggers = LoggerProvider(resource=self._resource)
        exporter = OTLPLogExporter(endpoint=self._target.address, insecure=not self._target.tls)
        return DecisionLogExport(self._loggers, exporter, queue, dropped)

    def shutdown(self) -> None:
        """Exports what is waiting (within the SDK's export timeout) and stops the SDK's threads. Blocking:
        call it off the event loop."""
        if self._loggers is not None:
            self._loggers.shutdown()
        self._tracers.shutdown()


def _resource(replica_id: str) -> Resource:
    """service.name "argwatch" unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names it; the replica as
    service.instance.id."""
    found = Resource.create({SERVICE_INSTANCE_ID: replica_id})
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "argwatch"}))
    return found
