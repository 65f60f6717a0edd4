"""The shared cache's local memory: lifetimes on an injected clock, add-if-absent, and a sweep that frees memory."""

from __future__ import annotations

from argwatch.server.state.local_memory import LocalMemory


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_value_lives_for_its_ttl_and_one_without_lives_on() -> None:
    clock = Clock()
    memory = LocalMemory(clock)
    memory.set("a", 1, ttl=10)
    memory.set("b", 2)
    clock.now += 9.9
    assert (memory.get("a"), memory.get("b")) == (1, 2)
    clock.now += 0.1
    assert (memory.get("a"), memory.get("b")) == (None, 2)
    assert memory.get("never") is None


def test_add_stores_only_over_an_absent_or_expired_key() -> None:
    clock = Clock()
    memory = LocalMemory(clock)
    assert memory.add("k", "first", ttl=5)
    assert not memory.add("k", "second", ttl=5)
    assert memory.get("k") == "first"
    clock.now += 5
    assert memory.add("k", "third", ttl=5) and memory.get("k") == "third"


def test_a_renewed_key_outlives_its_first_expiry_and_expired_keys_are_swept_by_later_writes() -> None:
    clock = Clock()
    memory = LocalMemory(clock)
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
