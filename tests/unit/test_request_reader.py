"""The native reader of a ValidateRequest's bytes reads what protobuf reads, or declines and leaves it to protobuf.

`_request.read_validate` takes the plain form only; `wire.call_from_body` parses anything else with
protobuf. Here protobuf is the definition: on generated requests, requests merged from two, and bytes
mutated at random, the reader either returns exactly the fields protobuf reads or returns None, and never
accepts bytes protobuf refuses. Then the call built from the bytes is the call built from the parsed message.
"""

from __future__ import annotations

import random

import pytest
from google.protobuf import struct_pb2
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.edge import wire
from argwatch.server.edge._request import read_call, read_validate
from argwatch.server.edge.request_limits import MAX_CALL_ID, MAX_PROMPT_VERSION, MAX_TENANT, MAX_TOOL, TooLong
from argwatch.server.verdict.tool_call import ToolCall
from argwatch.v1 import gateway_pb2 as pb


def _fields(request: pb.ValidateRequest) -> tuple[object, ...]:
    arguments = request.arguments_json if request.WhichOneof("arguments") == "arguments_json" else None
    return (
        request.tool,
        arguments,
        request.conversation_id,
        request.call_id,
        request.session.customer_id,
        request.session.tenant,
        request.model,
        request.prompt_version,
    )


def _agrees(body: bytes) -> str:
    """What the reader did with `body` ("read", "declined"), having checked it against protobuf's reading,
    and the call read_call made of it against the call made from protobuf's message."""
    _call_agrees(body)
    read = read_validate(body)
    try:
        parsed = pb.ValidateRequest.FromString(body)
    except DecodeError:
        assert read is None, f"read bytes protobuf refuses: {body!r}"
        return "declined"
    if read is None:
        return "declined"
    assert read == _fields(parsed), body
    if parsed.WhichOneof("arguments") == "arguments_struct" or parsed.session.attributes:
        raise AssertionError(f"read a request with what it does not take: {body!r}")
    return "read"


def _call_agrees(body: bytes) -> None:
    """read_call's call for `body` is the call made from protobuf's message, or it declined; it declines
    whatever the slower path refuses (TooLong, DecodeError) and what it makes in its own way (a call id minted,
    a reason the arguments could not be read)."""
    made = read_call(body)
    try:
        expected = wire.call_from_request(pb.ValidateRequest.FromString(body))
    except (DecodeError, TooLong):
        assert made is None, body
        return
    if made is not None:
        assert type(made) is ToolCall and made == expected and made.arguments_error == "", body
        assert made.call_id and made.arguments is not None


text = st.text(max_size=40)
requests = st.builds(
    pb.ValidateRequest,
    tool=text,
    conversation_id=text,
    call_id=text,
    model=text,
    prompt_version=text,
    session=st.one_of(
        st.none(),
        st.builds(
            pb.Session,
            customer_id=text,
            tenant=text,
            attributes=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
        ),
    ),
)


@settings(max_examples=400, deadline=None)
@given(requests, st.one_of(st.none(), st.binary(max_size=60), st.just(b"")), st.booleans())
def test_generated_requests_read_as_protobuf_reads_them(
    request: pb.ValidateRequest, arguments: bytes | None, as_struct: bool
) -> None:
    if arguments is not None:
        if as_struct:
            request.arguments_struct.CopyFrom(struct_pb2.Struct(fields={"a": struct_pb2.Value(string_value="b")}))
        else:
            request.arguments_json = arguments
    body = request.SerializeToString()
    outcome = _agrees(body)
    plain = not (as_struct and arguments is not None) and not request.session.attributes
    assert outcome == ("read" if plain else "declined")
    # Two messages' bytes, one after the other, are one message merged by protobuf's rules: declined or equal.
    _agrees(body + body)


@settings(max_examples=200, deadline=None)
@given(requests, requests)
def test_two_requests_merged_are_declined_or_read_alike(first: pb.ValidateRequest, second: pb.ValidateRequest) -> None:
    _agrees(first.SerializeToString() + second.SerializeToString())


def test_mutated_bytes_are_refused_or_read_as_protobuf_reads_them() -> None:
    base = pb.ValidateRequest(
        tool="refund_order",
        arguments_json=b'{"order_id": "ord_1", "reason_code": "DAMAGED_ITEM"}',
        conversation_id="conv-1",
        call_id="call-\u00e9\u4e2d\U0001f600",
        session=pb.Session(customer_id="cus_1", tenant="acme"),
        model="gpt",
        prompt_version="v1",
    ).SerializeToString()
    generator = random.Random(31)
    outcomes = {"read": 0, "declined": 0}
    for _ in range(20_000):
        body = bytearray(base)
        for _ in range(generator.randint(1, 4)):
            where = generator.randrange(len(body) + 1)
            kind = generator.randrange(4)
            if kind == 0 and where < len(body):
                body[where] = generator.randrange(256)
            elif kind == 1 and where < len(body):
                body[where] ^= 1 << generator.randrange(8)
            elif kind == 2:
                body[where:where] = bytes([generator.randrange(256)])
            else:
                del body[where:]
        outcomes[_agrees(bytes(body))] += 1
    assert outcomes["read"] > 1_000 and outcomes["declined"] > 1_000, outcomes  # both paths were taken


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x0a\x00",  # an empty tool
        b"\x12\x00",  # arguments_json present and empty: a MALFORMED_ARGUMENTS problem, not "no arguments"
        b"\x32\x00",  # an empty session
        b"\x0a\x02\xc3\x28",  # a tool that is not UTF-8
        b"\x0a\x03\xed\xa0\x80",  # a UTF-16 surrogate in UTF-8
        b"\x0a\x02\xc0\x80",  # an overlong NUL
        b"\x0a\x01\x00",  # a NUL, which UTF-8 allows
        b"\x0a\x81\x00a",  # a length in a padded varint
        b"\x8a\x00\x01a",  # a tag in a padded varint
        b"\x08\x01",  # the tool's number with a varint's wire type
        b"\x48\x01",  # field 9, unknown to this version
        b"\x00\x01",  # field 0
        b"\x0b\x0c",  # a group
        b"\x0a\x05ab",  # a length past the end
        b"\x32\x04\x1a\x02\x0a\x00",  # a session with an attribute's entry
        b"\x32\x02\x0a\x00\x32\x02\x12\x00",  # a session twice: merged
        b"\x12\x02{}\x1a\x00",  # JSON arguments, then a Struct: the last of a oneof wins
    ],
)
def test_edge_bytes_are_read_as_protobuf_reads_them(body: bytes) -> None:
    _agrees(body)


@settings(max_examples=300, deadline=None)
@given(requests, st.binary(max_size=60))
def test_the_call_from_bytes_is_the_call_from_the_message(request: pb.ValidateRequest, arguments: bytes) -> None:
    request.arguments_json = arguments
    request.call_id = request.call_id or "fixed"  # an empty one is minted afresh each time
    body = request.SerializeToString()
    assert wire.call_from_body(body) == wire.call_from_request(pb.ValidateRequest.FromString(body))
    _call_agrees(body)


@pytest.mark.parametrize(
    ("arguments", "taken"),
    [
        (b'{"a": [1, {"b": null}]}', True),
        (b"{}", True),
        (None, True),  # no arguments: {} as protobuf's path has them
        (b"[1]", False),  # no object: the slower path says why
        (b'"text"', False),
        (b"{", False),
        (b"", False),
        (b"\xff", False),
    ],
)
def test_read_call_makes_the_calls_it_can_and_declines_the_rest(arguments: bytes | None, taken: bool) -> None:
    request = pb.ValidateRequest(tool="t", call_id="c", session=pb.Session(customer_id="cus", tenant="acme"))
    if arguments is not None:
        request.arguments_json = arguments
    body = request.SerializeToString()
    assert (read_call(body) is not None) is taken
    _call_agrees(body)
    assert wire.call_from_body(body) == wire.call_from_request(request)


@pytest.mark.parametrize(
    "request_",
    [
        pb.ValidateRequest(tool="t"),  # no call id: minted
        pb.ValidateRequest(tool="t" * (MAX_TOOL + 1), call_id="c"),
        pb.ValidateRequest(tool="t", call_id="c" * (MAX_CALL_ID + 1)),
        pb.ValidateRequest(tool="t", call_id="c", prompt_version="v" * (MAX_PROMPT_VERSION + 1)),
        pb.ValidateRequest(tool="t", call_id="c", session=pb.Session(tenant="t" * (MAX_TENANT + 1))),
    ],
)
def test_read_call_declines_a_missing_call_id_and_a_string_past_its_limit(request_: pb.ValidateRequest) -> None:
    body = request_.SerializeToString()
    assert read_call(body) is None
    _call_agrees(body)
    # Exactly at every limit: taken.
    request_.call_id = request_.call_id or "c"
    for field, limit in (("tool", MAX_TOOL), ("call_id", MAX_CALL_ID), ("prompt_version", MAX_PROMPT_VERSION)):
        setattr(request_, field, "\u00e9" * limit)  # characters, not bytes
    request_.session.tenant = "t" * MAX_TENANT
    assert read_call(request_.SerializeToString()) == wire.call_from_request(request_)


def test_no_arguments_and_a_caller_string_past_its_limit_as_protobuf_has_them() -> None:
    call = wire.call_from_body(pb.ValidateRequest(tool="t", call_id="c").SerializeToString())
    assert (call.arguments, call.arguments_error, call.raw_arguments) == ({}, "", b"")
    with pytest.raises(TooLong, match=f"tool is {MAX_TOOL + 1} characters; at most {MAX_TOOL}"):
        wire.call_from_body(pb.ValidateRequest(tool="t" * (MAX_TOOL + 1)).SerializeToString())
    with pytest.raises(DecodeError):
        wire.call_from_body(b"\x0a\x05ab")
