"""Types of the C extension built from _otlp.c (a span as OTLP protobuf bytes, as otlp_encoding.span writes it;
the caller's traceparent, as trace_context.parse_parent reads it)."""

from collections.abc import Mapping

from opentelemetry.util.types import AttributeValue

def span(
    head: bytes,
    trace_id: bytes,
    span_id: bytes,
    parent_span_id: bytes,
    trace_state: str,
    start_ns: int,
    end_ns: int,
    own: Mapping[str, AttributeValue],
    error: str,
) -> bytes: ...
def traceparent(traceparent: str, tracestate: str, max_tracestate: int) -> tuple[str, str, bool, str] | None: ...
