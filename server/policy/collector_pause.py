"""The cycle collector paused while a large policy is read (on any thread), and resumed once no read is.

Reading a 10,000-tool policy makes millions of young objects (nodes, dicts,
lists, compiled schemas), none of them in a reference cycle; each young
collection during the read traversed them again, and made the read about
three times slower. The pause is process-wide: the event loop's thread sees
no collection either for as long as the read takes.

What a gateway's reload read is kept, too (`keep_what_is_made`): at the end of
the pause the young generation holds the whole new policy, and the collections
after it on the event loop traversed it three times over, 0.1 to 0.3 s each,
and every full collection for as long as it served. Frozen (gc.freeze, as
`argwatch serve` does once it has started), it is never traversed; it is freed
by reference counting once replaced. The price: a garbage cycle the event loop
made during the read (gRPC leaves about five small objects in cycles per call)
is frozen with it and never freed, so the freeze is made only when the read
made more than KEEP_ABOVE objects (docs/performance.md, catalogue.py).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Below this many young objects, the collections that follow cost a few milliseconds: nothing is frozen.
KEEP_ABOVE = 50_000

_lock = threading.Lock()
_readers = 0
_keep = False
_was_enabled = False


@contextmanager
def paused_collector(*, keep_what_is_made: bool = False) -> Iterator[None]:
    """No cyclic collection inside; the collector as it was once the last of overlapping pauses ends, with
    what they made frozen first if any of them asked to keep it."""
    global _readers, _keep, _was_enabled
    with _lock:
        if _readers == 0:
            _was_enabled = gc.isenabled()
            _keep = False
            gc.disable()
        _readers += 1
    try:
        yield
        with _lock:
            _keep = _keep or keep_what_is_made  # a read that failed made nothing to keep
    finally:
        with _lock:
            _readers -= 1
            if _readers == 0:
                if _keep and gc.get_count()[0] > KEEP_ABOVE:
                    gc.freeze()
                if _was_enabled:
                    gc.enable()
