"""The bounded TTL store: lifetimes on an injected clock, add-if-absent, a sweep that frees memory, and a bound."""

from __future__ import annotations

from argwatch.server.state.ttl_store import TtlStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_value_lives_for_its_ttl_and_one_without_lives_on() -> None:
    clock = Clock()
    memory = TtlStore(clock)
    memory.set("a", 1, ttl=10)
    memory.set("b", 2)
    clock.now += 9.9
    assert (memory.get("a"), memory.get("b")) == (1, 2)
    clock.now += 0.1
    assert (memory.get("a"), memory.get("b")) == (None, 2)
    assert memory.get("never") is None


def test_add_stores_only_over_an_absent_or_expired_key() -> None:
    clock = Clock()
    memory = TtlStore(clock)
    assert memory.add("k", "first", ttl=5)
    assert not memory.add("k", "second", ttl=5)
    assert memory.get("k") == "first"
    clock.now += 5
    assert memory.add("k", "third", ttl=5) and memory.get("k") == "third"


def test_a_renewed_key_outlives_its_first_expiry_and_expired_keys_are_swept_by_later_writes() -> None:
    clock = Clock()
    memory = TtlStore(clock)
    memory.set("renewed", 1, ttl=10)
    clock.now += 5
    memory.set("renewed", 2, ttl=10)  # now lives until 1015
    for index in range(100):
        memory.set(f"short{index}", index, ttl=1)
    clock.now += 6  # past the first expiry of "renewed" (1010) and every short one
    for index in range(40):  # each write sweeps up to four expired keys, never the renewed one
        memory.set(f"later{index}", index, ttl=100)
    assert memory.get("renewed") == 2
    assert len(memory) == 41  # the 100 short-lived keys are gone without being read
    memory.delete("renewed")
    assert memory.get("renewed") is None


def test_a_full_store_drops_expired_keys_first_then_the_one_closest_to_expiry() -> None:
    clock = Clock()
    memory = TtlStore(clock, max_entries=3)
    memory.set("soon", 1, ttl=1)
    memory.set("later", 2, ttl=100)
    memory.set("forever", 3)
    clock.now += 2  # "soon" has expired: making room takes it, and evicts nothing live
    memory.set("new", 4, ttl=50)
    assert (len(memory), memory.evictions) == (3, 0)
    memory.set("newer", 5, ttl=50)  # full of live keys: "new" and "newer" tie later; "new" expires first
    assert memory.get("new") is None and memory.evictions == 1
    assert (memory.get("later"), memory.get("forever"), memory.get("newer")) == (2, 3, 5)
    memory.set("later", 6, ttl=100)  # renewing a key never evicts
    assert memory.evictions == 1


def test_keys_kept_forever_are_evicted_oldest_first_when_nothing_has_a_lifetime() -> None:
    memory = TtlStore(Clock(), max_entries=2)
    for key in ("a", "b", "c"):
        memory.set(key, key)
    assert (memory.get("a"), memory.get("b"), memory.get("c"), memory.evictions) == (None, "b", "c", 1)


def test_renewing_one_key_forever_does_not_grow_the_store() -> None:
    clock = Clock()
    memory = TtlStore(clock)
    for _ in range(10_000):
        memory.set("k", 1, ttl=1000)
    assert len(memory) == 1 and len(memory._expiries) < 100
