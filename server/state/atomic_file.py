"""Writing a file so that a reader (or a restart after a crash) sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, syncs it, then renames it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1])
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
