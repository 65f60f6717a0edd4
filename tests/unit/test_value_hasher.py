"""The decision log's value digests: keyed BLAKE2b-256 of the canonical JSON, made in C, equal to what hashlib
and orjson give for every kind of value (the C encoder and hash are checked against both)."""

from __future__ import annotations

import hashlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.decisions.record import ValueHasher

KEY = b"k" * 40


def _reference(value: object, key: bytes = KEY) -> str:
    """What the digest is by definition: hashlib's keyed BLAKE2b over orjson's sorted-key JSON."""
    encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return "blake2b-256:" + hashlib.blake2b(encoded, key=key, digest_size=32).hexdigest()


def test_a_digest_is_keyed_blake2b_of_the_canonical_json() -> None:
    hasher = ValueHasher(KEY)
    expected = hashlib.blake2b(b'{"a":1,"b":[2,3]}', key=KEY, digest_size=32).hexdigest()
    assert hasher.digest({"b": [2, 3], "a": 1}) == f"blake2b-256:{expected}"  # key order does not matter
    assert hasher.digest("x") != ValueHasher(b"j" * 40).digest("x")  # another key, another digest
    assert hasher.digest("x") != "blake2b-256:" + hashlib.blake2b(b'"x"', digest_size=32).hexdigest()


def test_a_key_longer_than_blake2b_takes_is_hashed_down_not_cut() -> None:
    long_a, long_b = b"k" * 64 + b"a", b"k" * 64 + b"b"  # equal in their first 64 bytes
    assert ValueHasher(long_a).digest("x") != ValueHasher(long_b).digest("x")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        ValueHasher(b"short")


EDGES: list[object] = [
    "",
    "x" * 126,  # its JSON fills one block exactly (128 bytes with the quotes), then one over
    "x" * 127,
    "".join(chr(n) for n in range(128)),  # every escape orjson writes
    "é\u2028\u2029\U0001f600\x7f",
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**63,  # past int64: orjson writes it as u64
    2**64 - 1,
    True,
    False,
    None,
    1.5,
    1e16,
    [1, "a", None],
    {"b": 1, "a": [2, {"d": 0, "c": "é"}]},
]


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_the_c_digest_equals_hashlib_over_orjson_at_the_edges(value: object) -> None:
    assert ValueHasher(KEY).digest(value) == _reference(value)


@settings(max_examples=400, deadline=None)
@given(text=st.text(max_size=400), key=st.binary(min_size=32, max_size=64))
def test_the_c_digest_equals_hashlib_over_orjson_for_any_text(text: str, key: bytes) -> None:
    assert ValueHasher(key).digest(text) == _reference(text, key)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600))
def test_raw_bytes_are_digested_as_they_are_the_empty_ones_too(data: bytes) -> None:
    expected = "blake2b-256:" + hashlib.blake2b(data, key=KEY, digest_size=32).hexdigest()
    assert ValueHasher(KEY).digest_bytes(data) == expected


def test_a_value_orjson_refuses_raises_orjson_error_as_in_python() -> None:
    hasher = ValueHasher(KEY)
    for refused in (2**64, "\ud800", {"a": 2**64}):
        with pytest.raises(orjson.JSONEncodeError):
            hasher.digest(refused)


def test_a_call_arguments_are_digested_in_one_call_names_cut_and_counted_to_the_limit() -> None:
    hasher = ValueHasher(KEY)
    arguments = {"order_id": "ord_1", "n" * 300: 5, "c": [1], "d": None}
    found = hasher.digest_arguments(arguments, 3, 256)
    assert found == {"order_id": _reference("ord_1"), "n" * 256: _reference(5), "c": _reference([1])}


def test_a_digester_never_initialised_is_refused_not_used() -> None:
    """An object made by __new__ alone has no key and no encoder: each method raises rather than digest under a
    zero state or call a missing encoder (it crashed the process before)."""
    from argwatch.server.decisions._digest import Digester

    bare = Digester.__new__(Digester)
    with pytest.raises(RuntimeError, match="before __init__"):
        bare.digest(1.5)
    with pytest.raises(RuntimeError, match="before __init__"):
        bare.digest_bytes(b"x")
    with pytest.raises(RuntimeError, match="before __init__"):
        bare.digest_arguments({"a": 1}, 1, 1)
