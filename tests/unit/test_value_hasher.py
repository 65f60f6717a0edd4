"""The decision log's value digests: keyed, canonical, equal for equal values, and the memory of recent
short values bounded."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from argwatch.server.decisions.record import REMEMBERED, REMEMBERED_BYTES, ValueHasher


def test_a_digest_is_keyed_blake2b_of_the_canonical_json() -> None:
    key = b"k" * 40
    hasher = ValueHasher(key)
    expected = hashlib.blake2b(b'{"a":1,"b":[2,3]}', key=key, digest_size=32).hexdigest()
    assert hasher.digest({"b": [2, 3], "a": 1}) == f"blake2b-256:{expected}"  # key order does not matter
    assert hasher.digest("x") != ValueHasher(b"j" * 40).digest("x")  # another key, another digest
    assert hasher.digest("x") != "blake2b-256:" + hashlib.blake2b(b'"x"', digest_size=32).hexdigest()


def test_a_key_longer_than_blake2b_takes_is_hashed_down_not_cut() -> None:
    long_a, long_b = b"k" * 64 + b"a", b"k" * 64 + b"b"  # equal in their first 64 bytes
    assert ValueHasher(long_a).digest("x") != ValueHasher(long_b).digest("x")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        ValueHasher(b"short")


def test_recent_short_values_are_remembered_within_a_bound_and_long_ones_never() -> None:
    hasher = ValueHasher(b"k" * 32)
    first = hasher.digest("cus_000001")
    assert hasher.digest("cus_000001") == first  # remembered: the same digest
    for n in range(REMEMBERED + 10):
        hasher.digest(f"v{n}")
    assert len(hasher._recent) <= REMEMBERED
    assert hasher.digest("cus_000001") == first  # forgotten and made again: still the same
    long_value = "x" * (REMEMBERED_BYTES + 1)
    hasher.digest(long_value)
    assert orjson.dumps(long_value) not in hasher._recent
