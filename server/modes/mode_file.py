"""The mode state file: one of the two stores of the mode document (the other is Redis, fleet.py).

Each audited entry is one line appended to it (a JSON line with the overrides
in force after it), never a rewrite of the whole file on the event loop; it is
compacted, atomically, when it has grown to twice what is kept. It is read back
at start, so a restart never silently puts a tool back into a mode the on-call
changed. A state file written before the journal (one JSON document) is read too.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import orjson

from argwatch.common.files import MODE_STATE_BYTES, read_file
from argwatch.server.modes.document import (
    AUDIT_KEEP,
    REFUSED_KEEP,
    ModeChange,
    ModeDocument,
    ModeRefused,
    change_from_json,
    change_to_json,
    from_json,
    to_json,
    whole_number,
    with_entries,
)
from argwatch.server.state.atomic_file import remove_leftovers, write_atomically

log = logging.getLogger("argwatch.modes")


class ModeFileUnreadable(ModeRefused):
    """The state file exists and cannot be read as argwatch wrote it; the message says where and why."""


class ModeFile:
    """The mode document journalled to `path`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lines = 0  # lines in the file since it was last compacted
        remove_leftovers(path)  # of compactions a killed process left half-written

    def load(self) -> ModeDocument | None:
        """The document as last written, None without a file; ModeFileUnreadable rather than a guess (starting
        without the on-call's overrides would silently undo them)."""
        path = self.path
        try:
            raw = read_file(path, MODE_STATE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise ModeFileUnreadable(f"cannot read the mode state file {path}: {error.strerror}") from None
        lines: list[tuple[int, dict[str, Any]]] = []
        unreadable = 0
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError:
                unreadable += 1  # cut by a crash or a full disk mid-append: the lines around it stand
                continue
            if not isinstance(parsed, dict):
                raise ModeFileUnreadable(f"the mode state file {path}, line {number}: expected a JSON object")
            lines.append((number, parsed))
        if unreadable and not lines:
            raise ModeFileUnreadable(f"cannot read the mode state file {path}: no line of it is JSON")
        if unreadable:
            log.warning("mode state file %s: ignoring %d unreadable line(s) (cut mid-write)", path, unreadable)
        entries: list[ModeChange] = []
        document = ModeDocument()
        for number, entry in lines:
            # A line of the right JSON but the wrong shape was written by hand (or by someone else): refused,
            # naming where, rather than a traceback or a guess.
            try:
                if "change" in entry:  # a journal line: one entry, and the overrides after it
                    entries.append(change_from_json(entry["change"]))
                    state = {"overrides": entry["overrides"], "check_overrides": entry.get("check_overrides", [])}
                    document = replace(document, overrides=from_json(state).overrides)
                else:  # a compacted snapshot, or the whole file in the format before the journal
                    snapshot = entry.get("snapshot", entry)
                    if not isinstance(snapshot, dict):
                        raise TypeError("snapshot: expected an object")
                    document = from_json({**snapshot, "version": 0})
                    entries = list(document.entries())
                document = replace(document, version=whole_number(entry.get("version", 0), "version"))
            except (KeyError, TypeError, ValueError) as error:
                what = f"missing {error}" if isinstance(error, KeyError) else str(error)
                raise ModeFileUnreadable(f"the mode state file {path}, line {number}: {what}") from None
        document = with_entries(document, entries)
        self._lines = len(lines)
        return replace(document, version=document.version or len(document.audit))

    def append(self, document: ModeDocument, entries: list[ModeChange]) -> None:
        """One line per entry: the entry, and the overrides in force after them. An append of a few hundred
        bytes each (no fsync: a killed process loses nothing the kernel has; the compaction syncs)."""
        if self._lines >= 2 * (AUDIT_KEEP + REFUSED_KEEP):
            self.compact(document)
            return
        state = to_json(document, 0, 0)
        first = document.version - len(entries) + 1
        lines = [
            orjson.dumps(
                {
                    "version": first + offset,
                    "change": change_to_json(entry),
                    "overrides": state["overrides"],
                    **({"check_overrides": state["check_overrides"]} if "check_overrides" in state else {}),
                }
            )
            + b"\n"
            for offset, entry in enumerate(entries)
        ]
        with open(self.path, "ab") as handle:
            handle.write(b"".join(lines))
        self._lines += len(lines)

    def compact(self, document: ModeDocument) -> None:
        """The journal rewritten, atomically, as one line holding what is kept."""
        write_atomically(self.path, orjson.dumps({"version": document.version, "snapshot": to_json(document)}) + b"\n")
        self._lines = 1
