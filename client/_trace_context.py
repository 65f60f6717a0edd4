"""The caller's OpenTelemetry trace context as gRPC metadata, so the gateway's span joins the agent's trace.

Only when OpenTelemetry is installed (its API is imported on first use, not
with the client); without it no metadata is added and nothing is imported.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

Metadata = tuple[tuple[str, str], ...]

_NONE: Metadata = ()
_inject: Callable[[MutableMapping[str, str]], None] | None = None
_looked = False


def trace_metadata() -> Metadata | None:
    """`traceparent` (and `tracestate`, baggage) of the current span, by the application's configured
    propagators; None when there is no span or no OpenTelemetry."""
    inject = _injector()
    if inject is None:
        return None
    carrier: dict[str, str] = {}
    inject(carrier)
    return tuple(carrier.items()) or None


def _injector() -> Callable[[MutableMapping[str, str]], None] | None:
    global _inject, _looked
    if not _looked:
        _looked = True
        try:
            from opentelemetry.propagate import inject
        except ImportError:
            return None
        _inject = inject
    return _inject
