"""Reads the decision log back: every file of a folder in the order written (rotated and packed ones, then
the current one), line by line, filtered by call id, conversation, tool, decision or time.

Streams: a folder at its byte budget is read a line at a time, never whole. A
line that does not parse (a torn write at a crash) is skipped and counted, not
fatal; the current file's last line, still being written, is left for later.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

import orjson

from argwatch.server.decisions.packing import DAMAGED, open_rotated, rotated_oldest_first
from argwatch.server.decisions.record import MAX_TEXT
from argwatch.server.decisions.writer import CURRENT

Line = dict[str, Any]
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


def log_files(directory: Path) -> list[Path]:
    """The folder's files, oldest first: rotated ones in the order the writer ages them out, then the current."""
    files = [path for path, _ in rotated_oldest_first(directory)]
    current = directory / CURRENT
    if current.exists():
        files.append(current)
    return files


def read_lines(directory: Path, wanted: LineFilter, counts: ReadCounts) -> Iterator[Line]:
    """Every matching line of the folder, oldest first."""
    needle = wanted.needle()
    for path in log_files(directory):
        try:
            handle = _opened(path)
        except FileNotFoundError:
            continue
        with handle:
            try:
                yield from _matching(handle, needle, wanted, counts, complete_only=path.name == CURRENT)
            except DAMAGED as error:  # a damaged packed file: what came before the damage is kept
                counts.unreadable_files.append(f"{path.name}: {error}")


def _opened(path: Path) -> BinaryIO:
    if path.name == CURRENT:
        return open(path, "rb")
    return open_rotated(path)  # a rotated file: packed whole by the writer


def _matching(
    handle: IO[bytes], needle: bytes, wanted: LineFilter, counts: ReadCounts, *, complete_only: bool
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


def _skip_rest_of_line(handle: IO[bytes]) -> None:
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
    """Lines appended to the current file from this call on, across rotations (a new file is read from its
    start). The file is opened here, not at the first line asked for: "from now on" means now."""
    path = directory / CURRENT
    handle, identity = _open(path, at_end=True)
    return _followed(path, handle, identity, wanted, counts, poll_seconds, keep_going, sleep)


def _followed(
    path: Path,
    handle: IO[bytes] | None,
    identity: tuple[int, int],
    wanted: LineFilter,
    counts: ReadCounts,
    poll_seconds: float,
    keep_going: Callable[[], bool],
    sleep: Callable[[float], None],
) -> Iterator[Line]:
    pending = b""
    try:
        while keep_going():
            if handle is None:
                handle, identity = _open(path)
                if handle is None:  # no file yet: the next one is read from its start
                    sleep(poll_seconds)
                    continue
            chunk = handle.read(1 << 16)
            if not chunk and _replaced(path, identity):
                # Rotated: lines written just before it are still readable through the handle held open.
                chunk, rotated = handle.read(), True
            else:
                rotated = False
            if chunk:
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    line = _parsed(raw, counts) if raw and len(raw) <= MAX_LINE_BYTES else None
                    if line is not None and wanted.matches(line):
                        yield line
                if len(pending) > MAX_LINE_BYTES:  # a line longer than any the writer makes: dropped, counted
                    counts.unreadable_lines += 1
                    pending = b""
            if rotated:
                handle.close()
                handle, pending = None, b""
            elif not chunk:
                sleep(poll_seconds)
    finally:
        if handle is not None:
            handle.close()


def _open(path: Path, *, at_end: bool = False) -> tuple[IO[bytes] | None, tuple[int, int]]:
    """The file held open and its identity; (None, (0, 0)) while there is none."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (held across polls)
    except FileNotFoundError:
        return None, (0, 0)
    if at_end:
        handle.seek(0, os.SEEK_END)
    stat = os.fstat(handle.fileno())
    return handle, (stat.st_dev, stat.st_ino)


def _replaced(path: Path, identity: tuple[int, int]) -> bool:
    """Whether the current file is no longer the one held open (rotated away, or a new one made)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return True
    return (stat.st_dev, stat.st_ino) != identity
