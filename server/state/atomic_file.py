"""Writing a file so that a reader (or a restart after a crash) sees the old content or the new, never half.

A process killed mid-write (SIGKILL, the OOM killer, a node lost) leaves its
temporary file behind; `remove_leftovers` deletes those of one target at
start. Each temporary file is named after its target, so only that target's
are touched, and only those older than a write could take: another process
writing the same file (workers sharing a snapshot folder) keeps its own.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import tempfile
import time

log = logging.getLogger("argwatch.state")

# A write of the largest file (a million-member set, ~20 MB) takes well under a second; ten minutes old
# is a temporary file no running write will rename.
LEFTOVER_AFTER_SECONDS = 600.0


def _prefix(path: str) -> str:
    return f".{os.path.basename(path)}.tmp-"


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, syncs it, then renames it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=_prefix(path))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def remove_leftovers(path: str, older_than: float = LEFTOVER_AFTER_SECONDS) -> int:
    """Deletes the temporary files of interrupted writes of `path`; returns how many."""
    folder = os.path.dirname(os.path.abspath(path))
    removed = 0
    patterns = [
        glob.escape(_prefix(path)) + "*",
        # Named by argwatch before 2026-11-30 (".tmp-" and a random part, whatever the target): no version writes
        # these any more, so an old one is garbage whichever file it was for.
        ".tmp-*" + glob.escape(os.path.splitext(path)[1]),
    ]
    found = {name for pattern in patterns for name in glob.glob(os.path.join(glob.escape(folder), pattern))}
    for leftover in sorted(found):
        try:
            if time.time() - os.stat(leftover).st_mtime < older_than:
                continue  # perhaps a write in progress
            os.unlink(leftover)
            removed += 1
        except OSError:
            continue  # gone meanwhile, or not ours to remove: never a reason to stop a start
    if removed:
        log.warning("removed %d temporary file(s) of interrupted writes of %s", removed, path)
    return removed
