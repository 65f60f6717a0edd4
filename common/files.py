"""Reads a file argwatch was given by path: a regular file only, within a size cap, never blocking on a FIFO.

With the policy path replaced by a FIFO, a reload hung while holding the
reload lock (every later reload and SIGHUP waited behind it), and SIGTERM
logged "stopped" but the process never exited: the read sat in a thread the
interpreter joins at exit. `/dev/zero` would have been read until memory ran
out. So every file argwatch reads from a path goes through `read_file`: opened
without blocking (a FIFO opens at once, with no writer), checked with fstat on
the open descriptor (no window between a check and the open) to be a regular
file, refused past its cap, and read to at most the cap plus one byte.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

MIB = 1024 * 1024
# Each kind of file's cap: far above what a real one holds, far below what would hurt.
SMALL_FILE_BYTES = 1 * MIB  # Admin tokens, PEM certificates and keys
POLICY_BYTES = 16 * MIB
DEFINITIONS_BYTES = 64 * MIB  # imported tool definitions (MCP tools/list and the like)
MODE_STATE_BYTES = 64 * MIB  # the mode journal: compacted long before this
SETS_FILE_BYTES = 512 * MIB  # file value sets, and `replay --sets` (a million members is ~20 MB)
SAVED_COPY_BYTES = 1024 * MIB  # last-good copies in --snapshot-dir (the gateway's own)


class FileRefused(OSError):
    """A path argwatch will not read: not a regular file, or larger than its cap. `strerror` says which."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(errno.EINVAL, why, path)


def read_file(path: str, limit: int) -> bytes:
    """The whole of the regular file at `path`, at most `limit` bytes; FileRefused (an OSError) otherwise,
    and the usual OSError when it cannot be opened."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise FileRefused(path, f"not a regular file ({_kind(found.st_mode)}): argwatch reads only regular files")
        if found.st_size > limit:
            raise FileRefused(path, f"{found.st_size} bytes, over the {_size(limit)} argwatch reads of it")
        os.set_blocking(descriptor, True)
        chunks: list[bytes] = []
        taken = 0
        while taken <= limit:
            chunk = os.read(descriptor, min(MIB, limit + 1 - taken))
            if not chunk:
                break
            chunks.append(chunk)
            taken += len(chunk)
        if taken > limit:  # it grew while read
            raise FileRefused(path, f"over the {_size(limit)} argwatch reads of it")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def open_regular(path: str) -> BinaryIO:
    """The regular file at `path`, open for reading as a stream (a replay corpus, a samples log: no size cap,
    read line by line); FileRefused for anything else. The descriptor checked is the one returned."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused(path, f"not a regular file ({_kind(mode)}): argwatch reads only regular files")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB else f"{limit} bytes"
