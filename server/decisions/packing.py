"""Rotated decision-log files: packed with zstd (level 1) when they rotate, and opened by what they are packed with.

zstd rather than gzip because a rotated line's compression is CPU that every
decided call pays for, in the writer's thread: gzip's default level cost more
than the log's whole budget a call, zstd's level 1 a small part of it, and it
packs smaller (docs/performance.md, decision_log.py). Files rotated by an
earlier release (.jsonl.gz) are still read, aged out and counted in the budget.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import BinaryIO, cast

import zstandard

PACKED_SUFFIX = ".jsonl.zst"
LEGACY_SUFFIX = ".jsonl.gz"
ROTATED_GLOBS = (f"decisions-*{PACKED_SUFFIX}", f"decisions-*{LEGACY_SUFFIX}")
# Level 1: the fastest of zstd's regular levels, and still a smaller file than gzip -9 on these lines.
LEVEL = 1
# What a damaged rotated file raises while it is read (what came before the damage is kept).
DAMAGED = (OSError, EOFError, zlib.error, zstandard.ZstdError)


def rotated_files(directory: Path) -> list[Path]:
    """The folder's rotated files, both kinds, unsorted."""
    return [path for pattern in ROTATED_GLOBS for path in directory.glob(pattern)]


def rotated_oldest_first(directory: Path) -> list[tuple[Path, int]]:
    """The folder's rotated files with their sizes, oldest first (the order the writer ages them out), each
    stat'ed once; a file removed meanwhile (aged out, an operator's clean-up) is left out."""
    found = []
    for path in rotated_files(directory):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        found.append((stat.st_mtime, path.name, stat.st_size, path))
    found.sort()
    return [(path, size) for _, _, size, path in found]


def pack(source: Path, target: Path) -> None:
    """Writes `source` packed to `target` and fsyncs it (the caller renames it into place)."""
    packer = zstandard.ZstdCompressor(level=LEVEL, write_content_size=False)
    with open(source, "rb") as plain, open(target, "wb") as packed:
        packer.copy_stream(plain, packed)
        packed.flush()
        os.fsync(packed.fileno())


def open_rotated(path: Path) -> BinaryIO:
    """A rotated file, unpacked as it is read (a stream: never held whole)."""
    if path.name.endswith(LEGACY_SUFFIX):
        return cast(BinaryIO, gzip.GzipFile(path, "rb"))
    return cast(BinaryIO, _Unpacked(open(path, "rb")))


class CutShort(EOFError):
    """A packed file that ends before its zstd frame does (a crash mid-rotation, a copy cut short)."""


class _Unpacked:
    """readline over a zstd file, fed to the decompressor FEED bytes at a time: a zstd block of a few bytes
    can stand for 128 KiB, so a small feed bounds what one step can expand to (a planted file cannot make
    the reader hold gigabytes). A file that ends inside its frame raises CutShort once its lines are read."""

    FEED = 64  # at most ~2 MiB unpacked a step (measured on a level-19 bomb); ~320 MB/s of lines read

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._unpacker = zstandard.ZstdDecompressor().decompressobj()
        self._buffer = bytearray()
        self._ended = False

    def readline(self, limit: int = -1) -> bytes:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0 and (limit < 0 or newline < limit):
                return self._take(newline + 1)
            if limit >= 0 and len(self._buffer) >= limit:
                return self._take(limit)
            if self._ended:
                if self._buffer:
                    return self._take(len(self._buffer))
                if not self._unpacker.eof:
                    raise CutShort("the zstd frame is cut short")
                return b""
            piece = self._raw.read(self.FEED)
            if not piece or self._unpacker.eof:
                self._ended = True
                continue
            self._buffer += self._unpacker.decompress(piece)

    def _take(self, size: int) -> bytes:
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> _Unpacked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
