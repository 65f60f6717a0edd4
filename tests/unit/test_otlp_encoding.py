"""Spans written as OTLP bytes by hand (otlp_encoding.py) read back by opentelemetry-proto's own messages, field
for field; and the caller's traceparent read as W3C Trace Context says."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.util.types import AttributeValue

from argwatch.server.policy.model import Mode
from argwatch.server.tracing import otlp_encoding
from argwatch.server.tracing._otlp import export_request as native_export_request
from argwatch.server.tracing._otlp import span as native_span
from argwatch.server.tracing._otlp import traceparent as native_traceparent
from argwatch.server.tracing.otlp_encoding import varint
from argwatch.server.tracing.trace_context import MAX_TRACESTATE, Parent, parse_parent
from argwatch.server.tracing.traced_gateway import _VALIDATE, MAX_TEXT, judged_span, verdict_attributes
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode
from argwatch.server.verdict.tool_call import ToolCall
from tests.service.otlp_receiver import attributes

TRACE = bytes(range(1, 17))
SPAN = bytes(range(20, 28))
PARENT = bytes(range(40, 48))


def _read(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return request


def test_a_span_with_every_kind_of_attribute_reads_back_as_written() -> None:
    head = otlp_encoding.span_head("argwatch.Validate", {"rpc.system": "grpc", "rpc.method": "Validate"})
    own: dict[str, AttributeValue] = {
        "text": "é and ünïcode",
        "count": 3,
        "negative": -5,
        "big": 2**62,
        "yes": True,
        "no": False,
        "ratio": 0.25,
        "codes": ["out_of_set", "missing_required"],
        "empty": "",
    }
    one = otlp_encoding.span(head, TRACE, SPAN, PARENT, "vendor=a,other=b", 10**18, 10**18 + 12345, own, "")
    bare = otlp_encoding.span(head, TRACE, SPAN, b"", "", 1, 2, {}, "AbortError")
    resource, scope = otlp_encoding.request_head({"service.name": "argwatch", "pid": 42}, "argwatch.server")
    request = _read(otlp_encoding.export_request(resource, scope, [one, bare]))
    (resource_spans,) = request.resource_spans
    assert attributes(resource_spans.resource) == {"service.name": "argwatch", "pid": 42}
    (scope_spans,) = resource_spans.scope_spans
    assert scope_spans.scope.name == "argwatch.server"
    first, second = scope_spans.spans
    assert (first.trace_id, first.span_id, first.parent_span_id) == (TRACE, SPAN, PARENT)
    assert first.name == "argwatch.Validate" and first.kind == Span.SPAN_KIND_SERVER
    assert first.trace_state == "vendor=a,other=b"
    assert (first.start_time_unix_nano, first.end_time_unix_nano) == (10**18, 10**18 + 12345)
    assert attributes(first) == {"rpc.system": "grpc", "rpc.method": "Validate", **own}
    assert first.status.code == Status.STATUS_CODE_UNSET
    assert second.parent_span_id == b"" and second.trace_state == ""
    assert attributes(second) == {"rpc.system": "grpc", "rpc.method": "Validate"}
    assert second.status.code == Status.STATUS_CODE_ERROR and second.status.message == "AbortError"


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**32, 2**63 - 1, -1])
def test_varints_are_protobufs(value: int) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    parsed = AnyValue()
    parsed.ParseFromString(b"\x18" + varint(value))
    assert parsed.int_value == value


TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_HEX = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("traceparent", "expected"),
    [
        (f"00-{TRACE_HEX}-{SPAN_HEX}-01", Parent(TRACE_HEX, SPAN_HEX, True, "s")),
        (f"00-{TRACE_HEX}-{SPAN_HEX}-00", Parent(TRACE_HEX, SPAN_HEX, False, "s")),
        (f"  00-{TRACE_HEX}-{SPAN_HEX}-03 ", Parent(TRACE_HEX, SPAN_HEX, True, "s")),  # other flags ignored
        (f"01-{TRACE_HEX}-{SPAN_HEX}-01-later-fields", Parent(TRACE_HEX, SPAN_HEX, True, "s")),  # a later version
        (f"00-{TRACE_HEX}-{SPAN_HEX}-01-extra", None),  # version 00 has exactly four fields
        (f"ff-{TRACE_HEX}-{SPAN_HEX}-01", None),  # version ff is invalid
        (f"00-{TRACE_HEX.upper()}-{SPAN_HEX}-01", None),  # lower-case hex only
        (f"00-{'0' * 32}-{SPAN_HEX}-01", None),  # all-zero ids are invalid
        (f"00-{TRACE_HEX}-{'0' * 16}-01", None),
        (f"00-{TRACE_HEX[:-1]}-{SPAN_HEX}-01", None),
        ("garbage", None),
        ("", None),
    ],
)
def test_a_traceparent_is_read_as_w3c_trace_context_says(traceparent: str, expected: Parent | None) -> None:
    assert parse_parent(traceparent, "s") == expected


def test_an_overlong_tracestate_is_dropped_not_cut() -> None:
    found = parse_parent(f"00-{TRACE_HEX}-{SPAN_HEX}-01", "k=" + "v" * 600)
    assert found is not None and found.trace_state == ""


_pieces = st.sampled_from(
    ["00", "01", "ff", "fe", "0", "-", "--", TRACE_HEX, TRACE_HEX.upper(), "0" * 32, SPAN_HEX, "0" * 16, "01", "03",
     "0g", " ", "\t", "\n", "\u2003", "\x85", "\r", "-later", "x", "é"]
)  # fmt: skip
traceparents = st.lists(_pieces, max_size=9).map("".join) | st.builds(
    lambda before, version, trace, span, flags, after: f"{before}{version}-{trace}-{span}-{flags}{after}",
    st.sampled_from(["", " ", "\t\n", "\u2003"]),
    st.sampled_from(["00", "01", "ff", "0a", "0A"]),
    st.sampled_from([TRACE_HEX, "0" * 32, TRACE_HEX[:-1] + "g"]),
    st.sampled_from([SPAN_HEX, "0" * 16]),
    st.sampled_from(["00", "01", "0f", "ff", "1"]),
    st.sampled_from(["", " ", "-", "-x y", "-x\n ", "-x\ny", "\n", "\u2003", "x", " -x"]),
)


@settings(max_examples=1500, deadline=None)
@given(traceparent=traceparents, tracestate=st.sampled_from(["", " k=v ", "k=" + "v" * 600, "\u2003k=v\n"]))
def test_the_native_traceparent_reads_as_the_defined_one(traceparent: str, tracestate: str) -> None:
    """The call's traceparent is read in C (trace_context.caller_parent); parse_parent is its definition."""
    found = native_traceparent(traceparent, tracestate, MAX_TRACESTATE)
    assert (Parent(*found) if found is not None else None) == parse_parent(traceparent, tracestate)


scalars = st.text(max_size=40) | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
attribute_values = scalars | st.lists(scalars, max_size=4) | st.lists(scalars, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    own=st.dictionaries(st.text(max_size=30), attribute_values, max_size=12),
    parent=st.sampled_from([b"", PARENT]),
    trace_state=st.sampled_from(["", "vendor=a,other=b", "é" * 200]),
    error=st.sampled_from(["", "AbortError", "x" * 300]),
    times=st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)),
)
def test_the_native_span_is_the_defined_one_byte_for_byte(
    own: dict[str, AttributeValue], parent: bytes, trace_state: str, error: str, times: tuple[int, int]
) -> None:
    """The native encoder (_otlp.c) writes exactly what otlp_encoding.span, the definition, writes."""
    head = otlp_encoding.span_head("argwatch.Validate", {"rpc.system": "grpc"})
    start, end = times
    defined = otlp_encoding.span(head, TRACE, SPAN, parent, trace_state, start, end, own, error)
    assert native_span(head, TRACE, SPAN, parent, trace_state, start, end, own, error) == defined


@pytest.mark.parametrize("value", [{"a": 1}, [[1]], b"bytes", None, 2**63])
def test_a_value_no_attribute_can_hold_is_refused_not_written(value: object) -> None:
    with pytest.raises((TypeError, OverflowError)):
        native_span(b"", TRACE, SPAN, b"", "", 1, 2, {"bad": value}, "")  # type: ignore[dict-item]


# Text as a caller may write it: empty, short, past MAX_TEXT, and past it in characters that take several bytes.
caller_text = st.text(max_size=40) | st.text(min_size=MAX_TEXT - 2, max_size=MAX_TEXT + 40) | st.just("é" * 400)
hex_ids = st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.tuples(caller_text, caller_text, caller_text, caller_text, st.text(max_size=200)),
    codes=st.lists(st.sampled_from(ProblemCode), max_size=14),
    decision=st.sampled_from(Decision),
    mode=st.sampled_from(Mode),
    parent=st.none() | st.tuples(hex_ids, hex_ids.map(lambda text: text[:16]), st.text(max_size=600)),
    ids=st.tuples(hex_ids, st.integers(1, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)),
)
def test_a_judged_calls_span_is_verdict_attributes_span_byte_for_byte(
    texts: tuple[str, str, str, str, str],
    codes: list[ProblemCode],
    decision: Decision,
    mode: Mode,
    parent: tuple[str, str, str] | None,
    ids: tuple[str, int, int, int],
) -> None:
    """judged_span (one native call from the fields, on the event loop) writes what the definitions write: the
    span of verdict_attributes' dict, cut text, empty fields left out, the codes sorted, in the same order."""
    tool, call_id, conversation, model, version = texts
    call = ToolCall(tool, {}, call_id, conversation_id=conversation, model=model)
    problems = tuple(Problem(code=code, message="m", argument=f"a{n}") for n, code in enumerate(codes))
    verdict = Verdict(call_id, decision, mode, problems, (), (), version)
    caller = Parent(parent[0], parent[1], True, parent[2]) if parent is not None else None
    trace_id, span_id, start, end = ids
    defined = otlp_encoding.span(  # in Python throughout: the definitions, not the other native encoder
        _VALIDATE,
        bytes.fromhex(trace_id),
        span_id.to_bytes(8, "big"),
        bytes.fromhex(caller.span_id) if caller is not None else b"",
        caller.trace_state if caller is not None else "",
        start,
        end,
        verdict_attributes(call, verdict),
        "",
    )
    assert judged_span(_VALIDATE, caller, trace_id, span_id, start, end, call, verdict) == defined


def test_a_judged_span_of_text_that_is_not_utf8_raises_what_the_servicer_counts() -> None:
    """A lone surrogate cannot be written as UTF-8: the servicer catches UnicodeError, counts the span as
    `unencodable` and answers the call."""
    call = ToolCall("refund_\udcff", {}, "c1")
    verdict = Verdict("c1", Decision.ALLOW, Mode.OBSERVE, (), (), (), "v1")
    with pytest.raises(UnicodeError):
        judged_span(_VALIDATE, None, "1" * 32, 1, 1, 2, call, verdict)


@pytest.mark.parametrize("trace_id", ["1" * 31, "1" * 33, "g" * 32, "1" * 30 + "é1", 7])
def test_a_trace_id_that_is_not_32_hex_digits_is_refused(trace_id: object) -> None:
    verdict = Verdict("c1", Decision.ALLOW, Mode.OBSERVE, (), (), (), "v1")
    with pytest.raises(ValueError):
        judged_span(_VALIDATE, None, trace_id, 1, 1, 2, ToolCall("t", {}, "c1"), verdict)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(spans=st.lists(st.binary(max_size=300), max_size=20), resource=st.binary(max_size=200))
def test_the_native_request_is_the_defined_one_byte_for_byte(spans: list[bytes], resource: bytes) -> None:
    """The export thread's request (_otlp.c, sizes reckoned first) is otlp_encoding.export_request's."""
    scope = otlp_encoding.field(1, b"argwatch.server")
    assert native_export_request(resource, scope, spans) == otlp_encoding.export_request(resource, scope, spans)


@pytest.mark.parametrize("span_id", [-1, 2**64, 1.5])
def test_a_span_id_that_is_not_64_bits_is_refused(span_id: object) -> None:
    verdict = Verdict("c1", Decision.ALLOW, Mode.OBSERVE, (), (), (), "v1")
    with pytest.raises((OverflowError, TypeError)):
        judged_span(_VALIDATE, None, "1" * 32, span_id, 1, 2, ToolCall("t", {}, "c1"), verdict)  # type: ignore[arg-type]
