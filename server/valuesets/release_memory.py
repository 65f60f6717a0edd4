"""Hands memory that the C allocator holds free back to the OS after a large set was applied (glibc only).

A million-member snapshot arrives as ~50 MB of protobuf arenas, allocated with
malloc and freed once the set is indexed. glibc keeps most of that freed memory
in its heap instead of returning it, so the gateway's resident size would stay
~50 bytes a member higher than what it holds (measured by bench/memory.py).
`malloc_trim(0)` returns it, run in a thread (ctypes
releases the GIL), so the event loop does not wait for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def _find_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None


_TRIM = _find_trim()


def release_free_memory() -> bool:
    """Returns free heap memory to the OS; False where the C library cannot (then it is a no-op)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
