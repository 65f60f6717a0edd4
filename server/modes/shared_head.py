"""The fleet's mode state as stored from format 2: a small head every change reads, the audit in sorted sets beside it.

Up to format 1 the whole state was one document (version, overrides, the
newest thousand audit entries and hundred refusals), rewritten whole by every
change and read whole by every replica after each one: a change cost
O(audit), most of it parsing and copying entries nobody had changed. From
format 2 the key holds a head: the version, the overrides, and the newest
RECENT_KEEP entries added to each part of the audit (changes, refusals), in
the order they were added, with how many were ever added to each ("log": the
format, an epoch and the counts). The audit itself is beside it, two sorted
sets scored by the time of each entry (so that, cut to what the fleet keeps,
they keep the newest by time, as format 1 did and every copy does), added to
in the transaction that writes the head. A replica that read the head before
holds every entry it had, so the counts tell it which of the head's entries
are new: it follows the fleet in O(change). One that cannot (it fell behind by
more than the head holds, the epoch changed because the sets were written
again, or what overlaps differs because Redis lost writes in a failover) reads
the sets whole, as it read the whole document before.

A release that reads only format 1 sees in a head a document whose audit is
the newest entries (under the keys it knows): it works on, but would write
back what it holds and the head lacks. So a replica writes heads only while
every replica reporting to the fleet view says it reads them (fleet.py), and
format 1 otherwise.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Any

import orjson

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument
from argwatch.server.modes.shared_reader import BuiltLists, SharedReader, built_lists, checked_entry

FORMAT = 2
RECENT_KEEP = 32  # entries of each part in the head: a replica further behind than this reads the sets
LISTS = ("audit", "refused")  # the head's keys of each part's newest entries, as format 1 names its lists
MAX_EPOCH = 64


@dataclass(frozen=True, slots=True)
class Head:
    """What the head says: the state without its audit, and each list's newest entries and count."""

    document: ModeDocument  # version and overrides, no entries
    epoch: str  # written anew whenever the sets are written whole: counts of another epoch say nothing
    counts: tuple[int, int]  # entries ever added to the changes' set and the refusals' (this epoch)
    recent: tuple[tuple[ModeChange, ...], tuple[ModeChange, ...]]  # the last added to each, in that order


@dataclass(frozen=True, slots=True)
class Synced:
    """A replica's document that held every entry of the fleet's `head` and Redis every entry of it."""

    document: ModeDocument
    head: Head


def new_epoch() -> str:
    return secrets.token_hex(8)


def split(entries: list[ModeChange] | tuple[ModeChange, ...]) -> tuple[list[ModeChange], list[ModeChange]]:
    """Entries as the two sets keep them: changes, refusals."""
    return [entry for entry in entries if not entry.refused], [entry for entry in entries if entry.refused]


def appended(head: Head, entries: list[ModeChange], document: ModeDocument) -> Head:
    """The head after adding `entries` (in this order) to the sets, for `document` (its version and
    overrides; its entries are the sets')."""
    changes, refusals = split(entries)
    return Head(
        replace(document, audit=(), refused=()),
        head.epoch,
        (head.counts[0] + len(changes), head.counts[1] + len(refusals)),
        ((*head.recent[0], *changes)[-RECENT_KEEP:], (*head.recent[1], *refusals)[-RECENT_KEEP:]),
    )


def rewritten(document: ModeDocument, keep: tuple[int, int]) -> tuple[Head, list[ModeChange], list[ModeChange]]:
    """The head and the two sets of `document` written whole (a new epoch): its newest entries up to `keep`."""
    changes = list(document.audit[-keep[0] :]) if keep[0] else []
    refusals = list(document.refused[-keep[1] :]) if keep[1] else []
    head = Head(
        replace(document, audit=(), refused=()),
        new_epoch(),
        (len(changes), len(refusals)),
        (tuple(changes[-RECENT_KEEP:]), tuple(refusals[-RECENT_KEEP:])),
    )
    return head, changes, refusals


def head_json(head: Head) -> bytes:
    """The head as stored under the state's key."""
    data: dict[str, Any] = doc.to_json(head.document, 0, 0)
    for key, entries in zip(LISTS, head.recent, strict=True):
        data[key] = [doc.change_to_json(entry) for entry in entries]
    data["log"] = {"format": FORMAT, "epoch": head.epoch, "counts": list(head.counts)}
    return orjson.dumps(data)


def entry_json(entry: ModeChange) -> bytes:
    """One entry as a set keeps it (its score: its time)."""
    return orjson.dumps(doc.change_to_json(entry))


def entries_from_set(part: str, members: list[bytes]) -> list[ModeChange]:
    """The entries of one part's set as read (ZRANGE; `part` one of LISTS); the errors of a document argwatch
    did not write."""
    return [checked_entry(part, orjson.loads(raw)) for raw in members]


def entries_from_sets(changes: list[bytes], refusals: list[bytes]) -> list[ModeChange]:
    """The entries of the two sets as read."""
    return [*entries_from_set(LISTS[0], changes), *entries_from_set(LISTS[1], refusals)]


def with_sets(head: Head, entries: list[ModeChange]) -> ModeDocument:
    """The fleet's whole state: the head's version and overrides, the sets' entries (placed by time)."""
    return doc.with_entries(head.document, entries)


def new_since(synced: Synced, head: Head) -> list[ModeChange] | None:
    """The entries added since `synced` was the fleet's state, in the order they were, when the head
    holds them all and agrees with `synced` on the entries before them; None when it cannot tell (another
    epoch, a replica further behind than the head holds, or Redis lost or rewrote what overlaps)."""
    before = synced.head
    if head.epoch != before.epoch:
        return None
    new: list[ModeChange] = []
    for count, was, recent, known in zip(head.counts, before.counts, head.recent, before.recent, strict=True):
        added = count - was
        if added < 0 or added > len(recent):
            return None
        overlap = len(recent) - added
        if known and overlap < 1:
            return None  # no entry to tell a continuation from a Redis that lost writes and took as many new
        if overlap and (len(known) < overlap or recent[:overlap] != known[len(known) - overlap :]):
            return None
        new.extend(recent[overlap:])
    return new


def passed(synced: Synced, head: Head) -> bool:
    """Whether `head` is a state before `synced`'s: the same epoch, no more entries in either part, and its
    newest entries the ones `synced` held at those counts (an announcement that arrived after a newer read).
    Counts behind with other entries are a Redis that lost writes: not passed."""
    before = synced.head
    if head.epoch != before.epoch:
        return False
    for count, was, recent, known in zip(head.counts, before.counts, head.recent, before.recent, strict=True):
        if count > was:
            return False
        end = len(known) - (was - count)  # where the head's newest entry is among those `synced` held
        overlap = min(len(recent), end)
        if (recent and overlap < 1) or recent[len(recent) - overlap :] != known[end - overlap : end]:
            return False
    return True


def followed(synced: Synced, head: Head, new: list[ModeChange], keep: tuple[int, int]) -> ModeDocument:
    """`synced`'s document with the new entries placed by time, at the head's version and overrides, each part
    cut to the newest `keep` (what the sets hold: a replica holds the fleet's audit, not more, as when it
    took the whole document)."""
    document = synced.document
    state = head.document
    if not new and state.version == document.version and dict(state.overrides) == dict(document.overrides):
        return document  # nothing new: the same document, so nothing is adopted
    for entry in new:
        document = doc.record(document, entry)
    audit, refused = document.audit[-keep[0] :], document.refused[-keep[1] :]
    return replace(document, version=state.version, overrides=state.overrides, audit=audit, refused=refused)


class StateReader:
    """Reads what the state's key holds, a head (format 2) or a whole document (format 1), one read after
    another, reusing what the read before built."""

    def __init__(self, most_entries: int, *, heads: bool = True) -> None:
        """`heads`: False reads a head as a release before format 2 does, as a whole document."""
        self._heads = heads
        self._documents = SharedReader(most_entries)
        self._raw = b""
        self._head: Head | None = None
        self._lists: BuiltLists = {}

    def wrote(self, raw: bytes, head: Head) -> None:
        """This replica wrote `raw`, made from `head`: a read of the same bytes returns it unparsed."""
        self._raw, self._head = raw, head

    def wrote_document(self, raw: bytes, document: ModeDocument) -> None:
        """This replica wrote `raw` in format 1, made from `document` (shared_reader.as_written's)."""
        self._documents.wrote(raw, document)

    def read(self, raw: bytes) -> Head | ModeDocument:
        """A Head, or the whole document of format 1; orjson.JSONDecodeError, TypeError, ValueError or
        KeyError when the bytes are neither as argwatch writes them."""
        if self._head is not None and raw == self._raw:
            return self._head
        data = orjson.loads(raw)
        if not self._heads or not isinstance(data, dict) or "log" not in data:
            return self._documents.read_data(raw, data)
        log = data["log"]
        if not isinstance(log, dict) or log.get("format") != FORMAT or set(log) != {"format", "epoch", "counts"}:
            raise ValueError("log: not a format argwatch writes")
        epoch, counts = log["epoch"], log["counts"]
        if not isinstance(epoch, str) or len(epoch) > MAX_EPOCH:
            raise TypeError(f"log.epoch: expected a string of at most {MAX_EPOCH} characters")
        if not isinstance(counts, list) or len(counts) != len(LISTS):
            raise TypeError("log.counts: expected one count per list")
        for key, listed in doc.entry_lists(data):
            if len(listed) > RECENT_KEEP:
                raise ValueError(f"{key}: more entries than a head holds")
        lists = built_lists(data, self._lists)
        recent = tuple(tuple(lists[key][1]) for key in LISTS)
        head = Head(doc.from_json(data, []), epoch, (_count(counts[0]), _count(counts[1])), (recent[0], recent[1]))
        self._raw, self._head, self._lists = raw, head, lists
        return head


def _count(value: object) -> int:
    count = doc.whole_number(value, "log.counts")
    if count < 0:
        raise ValueError("log.counts: expected counts of at least 0")
    return count
