"""The caller's W3C trace context (`traceparent`, `tracestate` gRPC metadata), read so a span joins its trace.

Read by hand, as W3C Trace Context level 1 specifies it, rather than through
the SDK's propagator and context objects. `parse_parent` is the definition;
each call's is read in one native call that the tests hold to it
(`_otlp.c`: the regular expression cost more than the rest of a span's share
of the event loop). A malformed `traceparent` (or version ff, or an all-zero id) is
ignored: the span is then a new root, never an error for the call.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import grpc

from argwatch.server.tracing._otlp import traceparent as native_traceparent

_TRACEPARENT = re.compile(r"\s*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\s*")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_new_tuple = tuple.__new__
# A tracestate longer than the specification allows is dropped rather than cut (a cut one would be malformed).
MAX_TRACESTATE = 512


class Parent(NamedTuple):
    """The caller's span: its trace (hex, as the exemplar shows it), its span id, whether it sampled the trace."""

    trace_id: str
    span_id: str
    sampled: bool
    trace_state: str


def caller_parent(context: grpc.aio.ServicerContext[Any, Any]) -> Parent | None:
    """The caller's span from the call's metadata; None when it sent none, or a malformed one."""
    traceparent = tracestate = ""
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent":
            traceparent = str(value)
        elif key == "tracestate":
            tracestate = str(value)
    if not traceparent:
        return None
    found = native_traceparent(traceparent, tracestate, MAX_TRACESTATE)  # parse_parent, in one native call
    # Made as NamedTuple's own _make makes one, without the Python __new__ that Parent(*found) runs.
    return _new_tuple(Parent, found) if found is not None else None


def parse_parent(traceparent: str, tracestate: str = "") -> Parent | None:
    """`traceparent` (and `tracestate`) as a Parent; None when the traceparent is malformed."""
    found = _TRACEPARENT.fullmatch(traceparent)
    if found is None:
        return None
    version, trace_id, span_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    state = tracestate.strip() if len(tracestate) <= MAX_TRACESTATE else ""
    return Parent(trace_id, span_id, bool(int(flags, 16) & 1), state)
