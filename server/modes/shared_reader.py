"""The fleet's mode document read from Redis's bytes, reusing what the read before built.

Every change rewrites the fleet's document whole, its audit of up to a
thousand entries included, and every replica reads it whole: after each
announcement, before each of its own changes, and every REREAD_SECONDS.
Checked and built entry by entry, a full audit held the event loop far longer
than the change itself. Between two reads the document differs by an entry or
two (not at all, most of the time): bytes equal to the last read's are the same
document, and where a list of entries starts with a run of the last read's list
(the same list, or its oldest entries cut and new ones after), that run is
compared as JSON written again by orjson, in C, and its entries are the ones
built then. Written again, not compared as Python values: 1 == 1.0 == True and
0.0 == -0.0 in Python, and a bool where a number belongs must be refused as a
first read refuses it. Everything else is checked in full, as from_json checks
it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from argwatch.server.modes import document as doc
from argwatch.server.modes.document import ModeChange, ModeDocument

CHANGE_FIELDS = frozenset(doc.change_to_json(ModeChange(0.0, "", "", "", "", "", None, "")))


class SharedReader:
    """Reads the documents one replica gets from Redis, one after another."""

    def __init__(self, most_entries: int) -> None:
        self._most = most_entries  # a read holding more keeps nothing for the next (Redis's value is not ours)
        self._raw = b""
        self._document: ModeDocument | None = None
        self._lists: BuiltLists = {}  # key -> (its list as read, its entries)

    def wrote(self, raw: bytes, document: ModeDocument) -> None:
        """This replica committed `raw`, made from `document` (as_written's): the read of the announcement
        that follows, and the next change's, find it here instead of parsing what it wrote. The lists kept
        for reuse stay the last read's: a later document still starts with a run of them."""
        if len(document.audit) + len(document.refused) <= self._most:
            self._raw, self._document = raw, document

    def read(self, raw: bytes) -> ModeDocument:
        """The document in `raw`; orjson.JSONDecodeError, TypeError, ValueError or KeyError when it is not one
        argwatch wrote (an entry with a field more or less is not)."""
        if self._document is not None and raw == self._raw:
            return self._document
        return self.read_data(raw, orjson.loads(raw))

    def read_data(self, raw: bytes, shared: object) -> ModeDocument:
        """read() of `raw` parsed already (`shared`: what orjson.loads made of it)."""
        if self._document is not None and raw == self._raw:
            return self._document
        if not isinstance(shared, dict) or not isinstance(shared.get("version"), int):
            raise ValueError("not a mode state document")
        lists = built_lists(shared, self._lists)
        entries = [entry for _, built in lists.values() for entry in built]
        document = doc.from_json(shared, entries)
        kept = len(entries) <= self._most
        self._raw, self._document, self._lists = (raw, document, lists) if kept else (b"", None, {})
        return document


# Each list of entries of a document (audit, refused) as read, and the entries built from it.
BuiltLists = dict[str, tuple[list[Any], list[ModeChange]]]


def built_lists(data: dict[str, Any], before: BuiltLists) -> BuiltLists:
    """The lists of entries in `data`, each built reusing the run `before` (the read before's) holds of it,
    the rest checked and built one by one; the errors of from_json for a list or an entry not argwatch's."""
    lists: BuiltLists = {}
    for key, listed in doc.entry_lists(data):
        reused = reuse(listed, *before.get(key, ([], [])))
        lists[key] = (listed, reused + [checked_entry(key, entry) for entry in listed[len(reused) :]])
    return lists


def as_written(document: ModeDocument, keep: tuple[int, int]) -> ModeDocument:
    """What a read of `orjson.dumps(doc.to_json(document, *keep))` returns, made without writing or reading
    it: the document with its newest entries up to `keep` (most audit entries, most refusals)."""
    audit, refused = keep  # to_json keeps none of a list whose limit is 0 (and x[-0:] would be all of it)
    kept = [*(document.audit[-audit:] if audit else ()), *(document.refused[-refused:] if refused else ())]
    return doc.with_entries(replace(document, audit=(), refused=()), kept)


def reuse(listed: list[Any], before: list[Any], built: list[ModeChange]) -> list[ModeChange]:
    """The entries built before for the run at the start of `listed` that `before` holds in a row, up to the
    end of one of them; none unless the whole run is equal (a merge that placed an older entry among them)."""
    if not listed or not before:
        return []
    try:
        start = before.index(listed[0])  # the oldest entries cut since: a few, at the front
    except ValueError:
        return []
    run = min(len(listed), len(before) - start)
    if listed[:run] != before[start : start + run]:  # in C, and quick to tell most differences
        return []
    # The same JSON, types and all (True == 1.0 and -0.0 == 0.0 above): written again, byte for byte.
    return built[start : start + run] if orjson.dumps(listed[:run]) == orjson.dumps(before[start : start + run]) else []


def checked_entry(key: str, entry: object) -> ModeChange:
    """An entry of the list `key`, exactly as argwatch writes it (no field more or less), built."""
    if not isinstance(entry, dict) or set(entry) != CHANGE_FIELDS:  # each entry exactly as argwatch writes it
        raise TypeError(f"{key}: an entry of another shape")
    return doc.change_from_json(entry)
