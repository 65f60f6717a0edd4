"""The caller's W3C trace context (`traceparent`, `tracestate` gRPC metadata), read so a span joins its trace."""

from __future__ import annotations

from typing import Any

import grpc
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# W3C Trace Context only, whatever OTEL_PROPAGATORS says: that is what the metadata keys carry, and the
# propagator ignores a malformed value (the span is then a new root, never an error for the call).
_PROPAGATOR = TraceContextTextMapPropagator()
_KEYS = frozenset(("traceparent", "tracestate"))
# No caller context: an explicit empty one, so a span never picks up whatever context happens to be current.
_ROOT = Context()


def caller_context(context: grpc.aio.ServicerContext[Any, Any]) -> Context:
    """The context whose span is the caller's, from its metadata; an empty one when it sent none (or a bad one)."""
    carrier = {key: value for key, value in context.invocation_metadata() or () if key in _KEYS}
    if not carrier:
        return _ROOT
    return _PROPAGATOR.extract(carrier, _ROOT)
