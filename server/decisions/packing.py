"""Decision-log files packed with zstd (level 1): the current one as it is written, one frame a file flushed a
block per batch; rotated ones as it left them. Opened by what they are packed with.

zstd rather than gzip because a line's compression is CPU that every decided
call pays for, in the writer's thread: gzip's default level cost more than the
log's whole budget a call, zstd's level 1 a small part of it, and it packs
smaller (docs/performance.md, decision_log.py). Packed as written rather than
at rotation: the plain file's write, read-back and deletion had cost more than
the compression itself. Files of earlier releases are still read, aged out and
counted in the budget: rotated ones gzipped (.jsonl.gz), and a plain current
file (packed at the next start).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO, cast

import zstandard

PACKED_SUFFIX = ".jsonl.zst"
# A block ends the frame when its header's lowest bit is set; an empty raw block with it set ends any frame.
_LAST_EMPTY_BLOCK = b"\x01\x00\x00"
_MAGIC = b"\x28\xb5\x2f\xfd"
LEGACY_SUFFIX = ".jsonl.gz"
# A worker's own folder under the log's (`serve --workers`): a file has one writer.
WORKER_FOLDER = re.compile(r"w[0-9]{1,3}")
ROTATED_GLOBS = (f"decisions-*{PACKED_SUFFIX}", f"decisions-*{LEGACY_SUFFIX}")
# Level 1: the fastest of zstd's regular levels, and still a smaller file than gzip -9 on these lines.
LEVEL = 1
# What a damaged rotated file raises while it is read (what came before the damage is kept).
DAMAGED = (OSError, EOFError, zlib.error, zstandard.ZstdError)


def worker_folders(directory: Path) -> list[Path]:
    """The folders of `serve --workers` under the log's (w0, w1, ...), by number; none when it cannot be listed."""
    try:
        found = [path for path in directory.iterdir() if WORKER_FOLDER.fullmatch(path.name) and path.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda path: int(path.name[1:]))


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


def _compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=False)


def packer() -> zstandard.ZstdCompressionObj:
    """A frame's compressor: fed lines, flushed a block at a time, finished at rotation."""
    return _compressor().compressobj()


def packed_bound(plain: int) -> int:
    """The most bytes `plain` bytes of lines can take packed, with the frame's header and end: zstd keeps a block
    that does not shrink raw (3 bytes a header per block of at most 128 KiB), so never much more than plain."""
    return plain + plain // 4096 + 16


def pack(source: Path, target: Path) -> None:
    """Writes `source` packed to `target` and fsyncs it (the caller renames it into place): a plain current file
    an earlier release left."""
    with open(source, "rb") as plain, open(target, "wb") as packed:
        _compressor().copy_stream(plain, packed)
        packed.flush()
        os.fsync(packed.fileno())


def seal(path: Path) -> None:
    """Ends the frame of a current file that a stopped writer left open (a crash, a failed write): a block torn
    by the stop is cut off and an empty last block appended, so the file reads to its end, every whole block's
    lines kept, rather than reading as cut short. A file already ended, or not a frame of ours, is left as is."""
    with open(path, "r+b") as handle:
        end = _whole_blocks_end(handle, os.fstat(handle.fileno()).st_size)
        if end is None:
            return
        handle.truncate(end)
        handle.seek(end)
        handle.write(_LAST_EMPTY_BLOCK)
        handle.flush()
        os.fsync(handle.fileno())


def _whole_blocks_end(handle: BinaryIO, size: int) -> int | None:
    """Where the frame's last whole block ends, or None when the frame needs no sealing (it ended, or it is not
    one frame of zstd as the writer makes them: no checksum, which sealing could not write)."""
    head = handle.read(14)
    if len(head) < 6 or head[:4] != _MAGIC:
        return None
    descriptor = head[4]
    if descriptor & 0x04 or descriptor & 0x08:  # a content checksum, or the reserved bit: not ours
        return None
    single_segment = descriptor >> 5 & 1
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    at += (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    while True:
        handle.seek(at)
        header = handle.read(3)
        if len(header) < 3:
            return at  # cut at, or inside, a block's header
        if header == b"\0\0\0":  # empty raw blocks, which the writer never makes: a run of zeros
            nonzero = _next_nonzero(handle, at)
            if nonzero is None:
                return at  # a zeroed tail (what some filesystems leave of unsynced data after a power loss)
            at += (nonzero - at) // 3 * 3  # over the run at once, as empty blocks are read
            continue
        value = int.from_bytes(header, "little")
        kind, length = value >> 1 & 3, value >> 3
        body = 1 if kind == 1 else length  # an RLE block is one byte repeated `length` times
        if kind == 3 or at + 3 + body > size:
            return at  # a reserved block type (damage), or a block cut short: both cut off
        at += 3 + body
        if value & 1:
            return None  # the frame's last block: already ended


def _next_nonzero(handle: BinaryIO, at: int) -> int | None:
    """Where the first byte other than zero is from `at` on, or None when only zeros follow (read a MiB at a
    time, never whole)."""
    handle.seek(at)
    while chunk := handle.read(1 << 20):
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return at + len(chunk) - len(stripped)
        at += len(chunk)
    return None


def open_rotated(path: Path) -> BinaryIO:
    """A rotated file, unpacked as it is read (a stream: never held whole)."""
    if path.name.endswith(LEGACY_SUFFIX):
        return cast(BinaryIO, gzip.GzipFile(path, "rb"))
    return cast(BinaryIO, Unpacked(open(path, "rb")))


def open_current(path: Path) -> Unpacked:
    """The current file, unpacked as it is read while the writer still adds to it: its end is where the writer
    is, not damage, and a line is returned only once whole."""
    return Unpacked(open(path, "rb"), live=True)


class CutShort(EOFError):
    """A packed file that ends before its zstd frame does (a crash mid-rotation, a copy cut short)."""


class Unpacked:
    """readline over a zstd file, fed to the decompressor FEED bytes at a time: a zstd block of a few bytes
    can stand for 128 KiB, so a small feed bounds what one step can expand to (a planted file cannot make
    the reader hold gigabytes). A file that ends inside its frame raises CutShort once its lines are read;
    `live` (the current file): its end is only where the writer is, so readline returns b"" there, keeps an
    unfinished line for later, and reads on when called again after the file grew."""

    FEED = 64  # at most ~2 MiB unpacked a step (measured on a level-19 bomb); ~320 MB/s of lines read

    def __init__(self, raw: BinaryIO, *, live: bool = False) -> None:
        self._raw = raw
        self._live = live
        self._unpacker = zstandard.ZstdDecompressor().decompressobj()
        self._buffer = bytearray()
        self._ended = False

    def fileno(self) -> int:
        return self._raw.fileno()

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
            piece = b"" if self._unpacker.eof else self._raw.read(self.FEED)
            if not piece:
                if self._live and not self._unpacker.eof:
                    return b""  # where the writer is: an unfinished line stays in the buffer
                self._ended = True
                continue
            self._buffer += self._unpacker.decompress(piece)

    def _take(self, size: int) -> bytes:
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> Unpacked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
