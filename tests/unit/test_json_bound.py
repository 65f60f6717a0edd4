"""The JSON scanner _answers.c answers calls by (server/native/json_bound.h) reads what orjson reads, or declines:
whatever it accepts, orjson reads to a dict with the same string under each bound argument; and it accepts the
plain documents agents send."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.edge._answers import MAX_BOUND, bound_strings

NAMES = ("reason_code", "order_id", "é")


def orjson_reads(document: bytes, names: tuple[str, ...]) -> tuple[str, ...] | None:
    """What the Python path reads for each name: None where it would not answer (not a dict of those strs)."""
    try:
        decoded = orjson.loads(document)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(decoded, dict) or not all(isinstance(decoded.get(name), str) for name in names):
        return None
    return tuple(decoded[name] for name in names)


def agrees(document: bytes, names: tuple[str, ...] = NAMES) -> tuple[str, ...] | None:
    """The scanner's reading, having checked that orjson reads the same wherever the scanner accepts."""
    scanned = bound_strings(document, names)
    if scanned is not None:
        assert scanned == orjson_reads(document, names), document
    return scanned


# JSON values: every kind, strings with escapes and any character, integers past 64 bits, floats.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=12,
)
# What a bound argument holds when a call is answered: a string that needs no escape.
plain_strings = st.text(st.characters(exclude_categories=["Cs"], exclude_characters='"\\'), max_size=20).filter(
    lambda text: all(ord(character) >= 0x20 for character in text)
)
whitespace = st.sampled_from(["", "", " ", "\n", "\t", "\r\n  "])


def written(value: Any, space: str) -> bytes:
    """`value` as a JSON document (Python's json: integers of any size), with `space` after each separator."""
    return json.dumps(value, ensure_ascii=False, separators=("," + space, ":" + space)).encode()


@settings(max_examples=400, deadline=None)
@given(
    extra=st.dictionaries(st.text(max_size=8).filter(lambda key: key not in NAMES), values, max_size=5),
    bound=st.tuples(plain_strings, plain_strings, plain_strings),
    space=whitespace,
    around=whitespace,
)
def test_a_plain_document_is_read_as_orjson_reads_it(
    extra: dict[str, Any], bound: tuple[str, str, str], space: str, around: str
) -> None:
    document = around.encode() + written({**extra, **dict(zip(NAMES, bound, strict=True))}, space) + around.encode()
    scanned = agrees(document)
    # Declined only for a number it does not read (an exponent, as json writes large and small floats), or a
    # top-level key written with an escape (it might name a bound argument).
    escaped_key = any(json.dumps(key, ensure_ascii=False) != f'"{key}"' for key in extra)
    assert scanned == bound or has_exponent(extra) or escaped_key


def has_exponent(value: Any) -> bool:
    """Whether Python's json writes a number in `value` with an exponent."""
    if isinstance(value, float):
        return "e" in repr(value)
    if isinstance(value, dict):
        return any(has_exponent(item) for item in value.values())
    return isinstance(value, list) and any(has_exponent(item) for item in value)


# Bytes that make or break JSON, and UTF-8's edges.
INTERESTING = [
    *b'"\\{}[],:0-+eE.tfnu/ \t\n\r',
    0,
    0x1F,
    0x7F,
    0x80,
    0xBF,
    0xC0,
    0xC3,
    0xA9,
    0xED,
    0xA0,
    0xF4,
    0x90,
    0xFF,
]


@settings(max_examples=1500, deadline=None)
@given(
    value=st.dictionaries(st.sampled_from([*NAMES, "x", "y"]), values, max_size=5),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(INTERESTING), st.integers(0, 2)), max_size=3),
    data=st.data(),
)
def test_a_mangled_document_is_read_as_orjson_reads_it_or_declined(
    value: dict[str, Any], edits: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    document = bytearray(written(value, data.draw(whitespace)))
    for position, byte, kind in edits:
        at = position % (len(document) + 1)
        if kind == 0:
            document.insert(at, byte)
        elif at < len(document):
            if kind == 1:
                document[at] = byte
            else:
                del document[at]
    names = data.draw(st.lists(st.sampled_from([*NAMES, "x", "y"]), unique=True, max_size=3).map(tuple))
    agrees(bytes(document), names)


@pytest.mark.parametrize(
    ("document", "read"),
    [
        (b'{"reason_code": "DAMAGED"}', ("DAMAGED",)),
        (b' \t\r\n{"reason_code":"DAMAGED"} \n', ("DAMAGED",)),
        (
            b'{"x": [1, -0, 0.5, -12.25, true, false, null, {"y": [[]]}, "\\u00e9\\ud83d\\ude00\\/\\n"], '
            b'"reason_code": "\xc3\xa9\xf0\x9f\x98\x80\x7f"}',
            ("\u00e9\U0001f600\x7f",),
        ),
        (b'{"x": "\\u00E9", "reason_code": ""}', ("",)),
        (b'{"x": ' + b"9" * 300 + b', "reason_code": "a"}', ("a",)),
        (b'{"x": ' + b"[" * 63 + b"]" * 63 + b', "reason_code": "a"}', ("a",)),
        # Declined, though orjson reads them: an exponent, a long number, deep nesting, an escape in a key or a
        # bound value, a bound key twice (orjson keeps the last), a bound value not a string.
        (b'{"x": 1e5, "reason_code": "a"}', None),
        (b'{"x": ' + b"9" * 301 + b', "reason_code": "a"}', None),
        (b'{"x": ' + b"[" * 64 + b"]" * 64 + b', "reason_code": "a"}', None),
        (b'{"\\u0078": 1, "reason_code": "a"}', None),
        (b'{"reason_code": "\\u0041"}', None),
        (b'{"reason_code": "a", "reason_code": "b"}', None),
        (b'{"reason_code": 3}', None),
        (b'{"x": 1}', None),
        # Refused, as orjson refuses them.
        (b"", None),
        (b"[]", None),
        (b'"reason_code"', None),
        (b'\xef\xbb\xbf{"reason_code": "a"}', None),
        (b'{"reason_code": "a"} x', None),
        (b'{"reason_code": "a"}\x0b', None),
        (b'{"reason_code": "a\x1f"}', None),
        (b'{"reason_code": "\xed\xa0\x80"}', None),
        (b'{"reason_code": "\xc0\x80"}', None),
        (b'{"reason_code": "\xf4\x90\x80\x80"}', None),
        (b'{"reason_code": "\xc3"}', None),
        (b'{"x": "\\ud800", "reason_code": "a"}', None),
        (b'{"x": "\\udc00", "reason_code": "a"}', None),
        (b'{"x": "\\udc00\\ud800", "reason_code": "a"}', None),
        (b'{"x": "\\x", "reason_code": "a"}', None),
        (b'{"x": 01, "reason_code": "a"}', None),
        (b'{"x": 1., "reason_code": "a"}', None),
        (b'{"x": .5, "reason_code": "a"}', None),
        (b'{"x": -, "reason_code": "a"}', None),
        (b'{"x": tru, "reason_code": "a"}', None),
        (b'{"x": NaN, "reason_code": "a"}', None),
        (b'{"x": [1,], "reason_code": "a"}', None),
        (b'{"x": 1,, "reason_code": "a"}', None),
        (b'{"reason_code": "a",}', None),
        (b'{"reason_code": "a"', None),
        (b'{"reason_code" "a"}', None),
        (b'{"x": [1}, "reason_code": "a"}', None),
    ],
)
def test_documents_read_declined_and_refused(document: bytes, read: tuple[str, ...] | None) -> None:
    assert agrees(document, ("reason_code",)) == read


def test_no_names_reads_any_object_and_too_many_are_refused() -> None:
    assert agrees(b'{"a": "x", "b": "y"}', ("a", "b", "a")) == ("x", "y", "x")  # a policy may bind one twice
    assert agrees(b"{}", ()) == ()
    assert agrees(b'{"a": [1, {"b": "c"}]}', ()) == ()
    with pytest.raises(ValueError, match="at most"):
        bound_strings(b"{}", tuple(f"n{at}" for at in range(MAX_BOUND + 1)))
