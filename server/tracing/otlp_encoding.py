"""Spans as OTLP protobuf bytes (an ExportTraceServiceRequest), written directly rather than through message objects.

The SDK's encoder builds a protobuf object per span, attribute and value: it
cost more than the whole per-call budget (docs/performance.md, `tracing.py`).
Here a span is a few byte strings joined, and what every span shares (its
name, kind and RPC attributes, the resource, the scope) is encoded once. The
tests parse what this writes with opentelemetry-proto's own messages.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

from opentelemetry.util.types import AttributeValue

SPAN_KIND_SERVER = 2
STATUS_ERROR = 2

_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")


_SMALL = [bytes((number,)) for number in range(128)]


def varint(value: int) -> bytes:
    """A protobuf varint (a negative int64 as its 64-bit two's complement)."""
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _any_value(value: AttributeValue) -> bytes:
    if isinstance(value, str):
        return field(1, value.encode())
    if isinstance(value, bool):  # before int: a bool is an int
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    assert isinstance(value, Sequence)
    return field(5, b"".join(field(1, _any_value(item)) for item in value))  # a sequence: an ArrayValue


# Encoded attribute keys, and whole attributes whose values repeat (a decision, a mode, a policy version, a
# count): kept, so a span encodes afresh only what the caller wrote. Bounded: past it, nothing more is kept.
_KEYS: dict[str, bytes] = {}
_REPEATED: dict[tuple[str, AttributeValue], bytes] = {}
_KEEP = 4096


def attributes(found: Mapping[str, AttributeValue], number: int = 9, repeated: frozenset[str] = frozenset()) -> bytes:
    """Each attribute as a KeyValue in field `number` (9 in a Span, 1 in a Resource, 3 in a scope); those named
    in `repeated` take few values, and their encoding is kept."""
    parts = []
    for key, value in found.items():
        if key in repeated:
            kept = _REPEATED.get((key, value))  # hashable: a repeated attribute is a str, a number or a bool
            if kept is None:
                kept = field(number, _key(key) + field(2, _any_value(value)))
                if len(_REPEATED) < _KEEP:
                    _REPEATED[key, value] = kept
            parts.append(kept)
        else:
            parts.append(field(number, _key(key) + field(2, _any_value(value))))
    return b"".join(parts)


def _key(key: str) -> bytes:
    kept = _KEYS.get(key)
    if kept is None:
        kept = field(1, key.encode())
        if len(_KEYS) < _KEEP:
            _KEYS[key] = kept
    return kept


def span_head(name: str, rpc: Mapping[str, AttributeValue]) -> bytes:
    """What every span of one kind shares: its name, kind SERVER and the RPC attributes."""
    return field(5, name.encode()) + bytes((6 << 3, SPAN_KIND_SERVER)) + attributes(rpc)


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
    repeated: frozenset[str] = frozenset(),
) -> bytes:
    """One Span message (without its field tag): `head` from span_head, the ids, times and the call's own
    attributes; `error`, when not empty, makes its status ERROR with that message."""
    parts = [field(1, trace_id), field(2, span_id)]
    if trace_state:
        parts.append(field(3, trace_state.encode()))
    if parent_span_id:
        parts.append(field(4, parent_span_id))
    parts += (head, b"\x39" + _FIXED64.pack(start_ns), b"\x41" + _FIXED64.pack(end_ns), attributes(own, 9, repeated))
    if error:
        parts.append(field(15, field(2, error.encode()) + bytes((3 << 3, STATUS_ERROR))))
    return b"".join(parts)


def request_head(resource: Mapping[str, AttributeValue], scope: str) -> tuple[bytes, bytes]:
    """The encoded Resource and InstrumentationScope every request repeats."""
    return field(1, attributes(resource, 1)), field(1, field(1, scope.encode()))


def export_request(resource: bytes, scope: bytes, spans: Iterable[bytes]) -> bytes:
    """An ExportTraceServiceRequest of `spans` (each from `span`) under one resource and scope."""
    scope_spans = scope + b"".join(field(2, one) for one in spans)
    return field(1, resource + field(2, scope_spans))
