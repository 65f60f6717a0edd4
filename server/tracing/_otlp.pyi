"""Types of the C extension built from _otlp.c (spans and export requests as OTLP protobuf bytes, as
otlp_encoding writes them; the caller's traceparent, as trace_context.parse_parent reads it)."""

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
def verdict_span(
    head: bytes,
    trace_id: str,
    span_id: int,
    parent_span_id: str | None,
    trace_state: str,
    start_ns: int,
    end_ns: int,
    call_id: str,
    conversation_id: str,
    tool: str,
    model: str,
    decision: str,
    mode: str,
    problem_count: int,
    problem_codes: list[str] | tuple[str, ...],
    policy_version: str,
    max_text: int,
) -> bytes: ...
def export_request(resource: bytes, scope: bytes, spans: list[bytes]) -> bytes: ...
