"""Reads the decision log back: every file of a folder in the order written (rotated ones, then the current
one), line by line, filtered by call id, conversation, tool, decision or time.

Streams: a folder at its byte budget is read a line at a time, never whole. A
line that does not parse (a torn write at a crash) is skipped and counted, not
fatal; the current file's last line, still being written, is left for later.
Every file is packed (zstd), the current one too, as the writer writes it.
"""

from __future__ import annotations

import heapq
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import orjson

from argwatch.server.decisions.packing import (
    DAMAGED,
    Unpacked,
    open_current,
    open_rotated,
    rotated_oldest_first,
    worker_folders,
)
from argwatch.server.decisions.record import MAX_TEXT
from argwatch.server.decisions.writer import CURRENT, PLAIN_CURRENT

Line = dict[str, Any]
_CURRENT = (CURRENT, PLAIN_CURRENT)
# Longer than any line the writer makes (its arguments, problems and clear values are capped): a longer one is
# skipped and counted, read a piece at a time, never held whole.
MAX_LINE_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class LineFilter:
    """What a line must match: each field given must equal the line's (as the log cuts it); unset ones match all."""

    call_id: str = ""
    conversation: str = ""
    tool: str = ""
    decision: str = ""
    since: float = 0.0  # seconds since the epoch; 0: from the first line

    def matches(self, line: Line) -> bool:
        return (
            (not self.call_id or line.get("call_id") == self.call_id[:MAX_TEXT])
            and (not self.conversation or line.get("conversation_id") == self.conversation[:MAX_TEXT])
            and (not self.tool or line.get("tool") == self.tool[:MAX_TEXT])
            and (not self.decision or line.get("decision") == self.decision)
            and (not self.since or float(line.get("ts", 0.0)) >= self.since)
        )

    def needle(self) -> bytes:
        """Bytes every matching line contains (the most selective field's JSON), to skip others unparsed."""
        for value in (self.call_id, self.conversation, self.tool):
            if value:
                return orjson.dumps(value[:MAX_TEXT])
        return b""


@dataclass(slots=True)
class ReadCounts:
    """What a read saw besides lines: files it could not read, and lines that did not parse."""

    unreadable_lines: int = 0
    unreadable_files: list[str] = field(default_factory=list)


class _Lines(Protocol):
    def readline(self, limit: int = -1, /) -> bytes: ...


def log_files(directory: Path) -> list[Path]:
    """The folder's files, oldest first: rotated ones in the order the writer ages them out, then the current (an
    earlier release's plain one, until a start of this one packs it, then this one's)."""
    files = [path for path, _ in rotated_oldest_first(directory)]
    files += [path for path in (directory / PLAIN_CURRENT, directory / CURRENT) if path.exists()]
    return files


def log_folders(directory: Path) -> list[Path]:
    """The folder and its workers' folders: `serve --workers N` gives each worker its own (w0, w1, ...), since
    a file has one writer."""
    return [directory, *worker_folders(directory)]


def read_lines(directory: Path, wanted: LineFilter, counts: ReadCounts) -> Iterator[Line]:
    """Every matching line of the folder, oldest first; the workers' folders merged by time (a line held per
    folder)."""
    folders = log_folders(directory)
    if len(folders) == 1:
        return _folder_lines(directory, directory, wanted, counts)
    return heapq.merge(*(_folder_lines(directory, folder, wanted, counts) for folder in folders), key=_when)


def _when(line: Line) -> float:
    when = line.get("ts")
    return float(when) if isinstance(when, (int, float)) else 0.0


def _folder_lines(top: Path, folder: Path, wanted: LineFilter, counts: ReadCounts) -> Iterator[Line]:
    needle = wanted.needle()
    for path in log_files(folder):
        try:
            handle = _opened(path)
        except FileNotFoundError:
            continue
        with handle:
            try:
                yield from _matching(handle, needle, wanted, counts, complete_only=path.name in _CURRENT)
            except DAMAGED as error:  # a damaged packed file: what came before the damage is kept
                counts.unreadable_files.append(f"{path.relative_to(top)}: {error}")


def _opened(path: Path) -> BinaryIO | Unpacked:
    if path.name == CURRENT:
        return open_current(path)
    if path.name == PLAIN_CURRENT:
        return open(path, "rb")
    return open_rotated(path)


def _matching(
    handle: _Lines, needle: bytes, wanted: LineFilter, counts: ReadCounts, *, complete_only: bool
) -> Iterator[Line]:
    while raw := handle.readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            # No line the gateway writes is this long: a planted or damaged file. Skipped, never held whole.
            counts.unreadable_lines += 1
            _skip_rest_of_line(handle)
            continue
        if complete_only and not raw.endswith(b"\n"):
            return  # still being written
        if needle and needle not in raw:
            continue
        line = _parsed(raw, counts)
        if line is not None and wanted.matches(line):
            yield line


def _skip_rest_of_line(handle: _Lines) -> None:
    while chunk := handle.readline(MAX_LINE_BYTES):
        if chunk.endswith(b"\n"):
            return


def _parsed(raw: bytes, counts: ReadCounts) -> Line | None:
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
        counts.unreadable_lines += 1
        return None
    if not isinstance(line, dict):
        counts.unreadable_lines += 1
        return None
    return line


def last_lines(directory: Path, count: int, wanted: LineFilter, counts: ReadCounts) -> list[Line]:
    """The last `count` matching lines, oldest first (only `count` are held at once)."""
    return list(deque(read_lines(directory, wanted, counts), maxlen=count))


def follow(
    directory: Path,
    wanted: LineFilter,
    counts: ReadCounts,
    *,
    poll_seconds: float = 0.5,
    keep_going: Callable[[], bool] = lambda: True,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Line]:
    """Lines appended to the current files (the folder's, and its workers') from this call on, across rotations
    (a new file is read from its start). The files are opened here, not at the first line asked for: "from now
    on" means now. A worker's folder made later (the gateway started, or restarted with more workers) is read
    from its start."""
    followers = {folder: _Follower(folder, directory, counts) for folder in log_folders(directory)}
    return _followed(directory, followers, wanted, counts, poll_seconds, keep_going, sleep)


def _followed(
    directory: Path,
    followers: dict[Path, _Follower],
    wanted: LineFilter,
    counts: ReadCounts,
    poll_seconds: float,
    keep_going: Callable[[], bool],
    sleep: Callable[[float], None],
) -> Iterator[Line]:
    try:
        while keep_going():
            for folder in log_folders(directory):
                if folder not in followers:
                    followers[folder] = _Follower(folder, directory, counts, skip_written=False)
            busy = False
            for follower in followers.values():
                yield from follower.new_lines(wanted)
                busy = busy or follower.moved_on
            if not busy:
                sleep(poll_seconds)
    finally:
        for follower in followers.values():
            follower.close()


class _Follower:
    """One folder's current file, held open and read as it grows; when the writer rotates it away, read to its
    end, then the next one from its start. A packed file cannot be read from its middle, so what the file holds
    when followed is unpacked and passed over."""

    def __init__(self, folder: Path, top: Path, counts: ReadCounts, *, skip_written: bool = True) -> None:
        self._path = folder / CURRENT
        self._shown = self._path.relative_to(top)
        self._counts = counts
        self.moved_on = False  # the last read ended a file: the next one is read without waiting
        self._damaged_file = (0, 0)  # a file that could not be read on: not opened again
        self._handle, self._identity = _open(self._path)
        if self._handle is not None and skip_written:
            try:
                while self._handle.readline(MAX_LINE_BYTES + 1):
                    pass
            except DAMAGED as error:
                self._damaged(error)

    def new_lines(self, wanted: LineFilter) -> Iterator[Line]:
        self.moved_on = False
        if self._handle is None:
            self._handle, self._identity = _open(self._path)
            if self._handle is None:  # no file yet: the next one is read from its start
                return
            if self._identity == self._damaged_file:  # until the writer starts another
                self.close()
                return
        rotated = _replaced(self._path, self._identity)  # asked first: what was written before it is read below
        try:
            yield from _matching(self._handle, b"", wanted, self._counts, complete_only=True)
        except DAMAGED as error:
            self._damaged(error)
            return
        if rotated:
            self.close()
            self.moved_on = True

    def _damaged(self, error: Exception) -> None:
        """Nothing more can be read of this file: said, and the next one the writer starts is read instead."""
        self._counts.unreadable_files.append(f"{self._shown}: {error}")
        self._damaged_file = self._identity
        self.close()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _open(path: Path) -> tuple[Unpacked | None, tuple[int, int]]:
    """The file held open and its identity; (None, (0, 0)) while there is none."""
    try:
        handle = open_current(path)
    except FileNotFoundError:
        return None, (0, 0)
    stat = os.fstat(handle.fileno())
    return handle, (stat.st_dev, stat.st_ino)


def _replaced(path: Path, identity: tuple[int, int]) -> bool:
    """Whether the current file is no longer the one held open (rotated away, or a new one made)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return True
    return (stat.st_dev, stat.st_ino) != identity
