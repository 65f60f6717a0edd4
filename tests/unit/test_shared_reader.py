"""The fleet's document read again reuses what the read before built, and reads exactly as a first read would."""

from __future__ import annotations

import random
from dataclasses import asdict, fields
from types import MappingProxyType

import orjson
import pytest

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument, Override, Target
from argwatch.server.modes.shared_reader import SharedReader, as_written
from argwatch.server.policy.model import Mode

KEEP = (1000, 100)
MOST = sum(KEEP)


def change(number: int, refused: bool = False) -> ModeChange:
    return ModeChange(
        at=1_800_000_000.0 + number,
        actor=f"oncall-{number % 7}@example.com",
        target=f"tool_{number % 13}",
        old="observe",
        new="reject",
        reason=f"INC-{number}",
        expires_at=None if number % 3 else 1_800_000_900.0 + number,
        outcome="refused: not a tool of this policy" if refused else "applied",
        check="record:order" if number % 5 == 0 else "",
    )


def written(audit: list[ModeChange], refused: list[ModeChange] = (), version: int = 0) -> bytes:  # type: ignore[assignment]
    overrides = MappingProxyType({Target("tool_1"): Override(Mode.OBSERVE, "ana", "INC-1", 1_800_000_000.0, None)})
    document = ModeDocument(version or len(audit), overrides, tuple(audit), tuple(refused))
    return orjson.dumps(doc.to_json(document, *KEEP))


def by_time(entry: ModeChange) -> float:
    return entry.at


def first_read(raw: bytes) -> ModeDocument:
    """How a replica that never read before reads it: from_json over every entry."""
    return doc.from_json(orjson.loads(raw))


def test_change_to_json_writes_what_asdict_wrote() -> None:
    entry = change(5)
    assert doc.change_to_json(entry) == asdict(entry)
    assert list(doc.change_to_json(entry)) == [field.name for field in fields(ModeChange)]


def test_a_document_read_again_reuses_the_entries_it_holds_in_a_row() -> None:
    reader = SharedReader(MOST)
    entries = [change(number) for number in range(1000)]
    before = reader.read(written(entries))
    assert before == first_read(written(entries))
    assert reader.read(written(entries)) is before  # the same bytes: the same document

    appended = reader.read(written([*entries[1:], change(1000)]))  # full: the oldest cut, a new one after
    assert appended == first_read(written([*entries[1:], change(1000)]))
    assert all(new is old for new, old in zip(appended.audit, before.audit[1:], strict=False))  # built once


def test_an_entry_placed_among_the_ones_read_before_is_read_in_full() -> None:
    reader = SharedReader(MOST)
    entries = [change(number * 2) for number in range(50)]
    reader.read(written(entries))
    merged = [*entries[:20], change(41), *entries[20:]]  # a merge puts an older entry where its time is
    assert reader.read(written(merged)) == first_read(written(merged))


def test_what_a_read_before_checked_is_checked_again_where_it_changed() -> None:
    reader = SharedReader(MOST)
    entries = [change(number) for number in range(10)]
    reader.read(written(entries))
    data = orjson.loads(written(entries))
    data["audit"][3]["actor"] = 7  # the same entry, now not what argwatch writes
    with pytest.raises(TypeError):
        reader.read(orjson.dumps(data))
    data = orjson.loads(written(entries))
    data["audit"][-1]["extra"] = "x"  # a field more on the newest
    with pytest.raises(TypeError):
        reader.read(orjson.dumps(data))
    data = orjson.loads(written(entries))
    del data["audit"][0]["check"]  # a field less on the oldest
    with pytest.raises(TypeError):
        reader.read(orjson.dumps(data))
    assert reader.read(written(entries)) == first_read(written(entries))  # and the good one reads as before


def test_a_document_with_more_entries_than_a_fleet_keeps_is_read_but_not_kept() -> None:
    reader = SharedReader(most_entries=5)
    raw = written([change(number) for number in range(6)])
    first = reader.read(raw)
    again = reader.read(raw)
    assert again == first and again is not first


def test_a_thousand_documents_in_a_row_read_as_first_reads() -> None:
    """Entries added, cut, refused, reordered, changed, documents swapped for older ones: each read as from_json
    reads it."""
    rng = random.Random(31)
    reader = SharedReader(MOST)
    audit, refused = [change(number) for number in range(rng.randrange(0, 60))], []
    seen: list[bytes] = []
    for step in range(1000):
        roll = rng.random()
        if roll < 0.4:
            audit.append(change(1000 + step))
        elif roll < 0.5:
            refused.append(change(5000 + step, refused=True))
        elif roll < 0.6 and audit:
            del audit[: rng.randrange(1, 4)]
        elif roll < 0.7 and audit:
            audit.insert(rng.randrange(len(audit)), change(rng.randrange(900)))
        elif roll < 0.8 and audit:
            position = rng.randrange(len(audit))
            audit[position] = ModeChange(**{**asdict(audit[position]), "reason": f"edited {step}"})
        raw = rng.choice(seen) if roll > 0.95 and seen else written(sorted(audit, key=lambda e: e.at), refused)
        seen.append(raw)
        assert reader.read(raw) == first_read(raw), step


@pytest.mark.parametrize("field", ["at", "expires_at"])
@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_where_a_number_was_is_refused_as_a_first_read_refuses_it(field: str, flag: bool) -> None:
    """True == 1 == 1.0 and False == 0: an entry read before with 1.0 (or 0.0) is not the entry with a bool."""
    entry = ModeChange(float(flag), "ana", "tool_1", "observe", "reject", "INC-1", float(flag), "applied")
    reader = SharedReader(MOST)
    reader.read(written([entry]))
    data = orjson.loads(written([entry]))
    data["audit"][0][field] = flag
    with pytest.raises(TypeError):
        first_read(orjson.dumps(data))
    with pytest.raises(TypeError):
        reader.read(orjson.dumps(data))


def test_what_a_replica_wrote_reads_back_as_a_first_read_would_without_a_parse() -> None:
    """as_written makes, from the document, what reading its bytes gives; wrote() keeps it for those bytes."""
    rng = random.Random(7)
    for step in range(200):
        audit = sorted((change(rng.randrange(5000)) for _ in range(rng.randrange(0, 1300))), key=lambda e: e.at)
        refused = sorted(
            (change(rng.randrange(5000), refused=True) for _ in range(rng.randrange(0, 130))), key=lambda e: e.at
        )
        overrides = {
            Target(f"tool_{n}", "record:order" if n % 2 else ""): Override(
                Mode.REJECT if n % 3 else Mode.OBSERVE, "ana", f"INC-{n}", 1_800_000_000.0 + n, None if n % 4 else 1e10
            )
            for n in range(rng.randrange(0, 6))
        }
        keep = rng.choice([KEEP, (5, 0), (0, 3), (0, 0)])
        document = ModeDocument(rng.randrange(1, 10**6), MappingProxyType(overrides), tuple(audit), tuple(refused))
        raw = orjson.dumps(doc.to_json(document, *keep))
        made = as_written(document, keep)
        assert made == first_read(raw), step
        reader = SharedReader(MOST)
        reader.wrote(raw, made)
        assert reader.read(raw) is made


def test_a_zero_read_again_with_its_sign_changed_reads_as_a_first_read() -> None:
    """0.0 == -0.0 in Python: a run is reused only where it is the same JSON, so the sign is read as written."""
    entry = ModeChange(0.0, "ana", "tool_1", "observe", "reject", "INC-1", 0.0, "applied")
    reader = SharedReader(MOST)
    reader.read(written([entry, change(1)]))
    data = orjson.loads(written([entry, change(1)]))
    data["audit"][0]["expires_at"] = -0.0
    again = reader.read(orjson.dumps(data))
    assert str(again.audit[0].expires_at) == str(first_read(orjson.dumps(data)).audit[0].expires_at) == "-0.0"
