"""A status snapshot in pages, each well under gRPC's 4 MiB message limit, and the last few snapshots' pages kept.

With 500 tools of 12 bound arguments each and traffic on every tool, one
GetStatus answer was 4.39 MiB: `argwatch watch`, the TUI and every client on
gRPC's default limit failed with RESOURCE_EXHAUSTED. A snapshot is now cut
into pages of at most PAGE_BYTES: each page carries the snapshot's header
(replica, policy, modes, attention), and the repeated parts (tools, value
sets, argument rows, foreign overrides, replicas) in their order, as many as
fit. A page says which it is (`page` of `pages`) and, but for the last, the
token of the next. GetStatus keeps the pages of its last few snapshots for a
while, so that a client asking page by page reads one snapshot, not a mix.
Clients join them with common/status_pages.py.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from argwatch.common.status_pages import PAGED_FIELDS
from argwatch.v1 import admin_pb2

PAGE_BYTES = 3 * 1024 * 1024
ITEMS_PER_SLICE = 100
KEPT_SNAPSHOTS = 8
KEPT_SECONDS = 60.0


async def split_status(
    snapshot: admin_pb2.GetStatusResponse, budget: int = PAGE_BYTES
) -> list[admin_pb2.GetStatusResponse]:
    """`snapshot` in pages of at most `budget` bytes each (one item larger than a page gets a page of its own).
    Each item is measured and copied once; the event loop runs every ITEMS_PER_SLICE items (a large snapshot
    is a long pass: docs/performance.md)."""
    header = admin_pb2.GetStatusResponse()
    for field, value in snapshot.ListFields():  # the single fields only: the lists are not copied twice
        if field.name in PAGED_FIELDS:
            continue
        if field.message_type is not None:
            getattr(header, field.name).CopyFrom(value)
        else:
            setattr(header, field.name, value)
    header_size = header.ByteSize() + 32  # and the page fields
    pages = [_page(header)]
    size, count = header_size, 0
    for name in PAGED_FIELDS:
        for item in getattr(snapshot, name):
            item_size = item.ByteSize() + 8  # tag and length
            if size + item_size > budget and size > header_size:
                pages.append(_page(header))
                size = header_size
            getattr(pages[-1], name).append(item)
            size += item_size
            count += 1
            if count % ITEMS_PER_SLICE == 0:
                await asyncio.sleep(0)
    for number, page in enumerate(pages, start=1):
        page.page, page.pages = number, len(pages)
    return pages


def _page(header: admin_pb2.GetStatusResponse) -> admin_pb2.GetStatusResponse:
    page = admin_pb2.GetStatusResponse()
    page.CopyFrom(header)
    return page


class KeptPages:
    """The pages of the last KEPT_SNAPSHOTS snapshots, for KEPT_SECONDS, by an unguessable snapshot id."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._kept: OrderedDict[str, tuple[float, list[admin_pb2.GetStatusResponse]]] = OrderedDict()

    def keep(self, pages: list[admin_pb2.GetStatusResponse]) -> list[admin_pb2.GetStatusResponse]:
        """`pages`, each but the last with the token of the next; kept when there is more than one."""
        if len(pages) == 1:
            return pages
        snapshot = secrets.token_urlsafe(12)
        for number, page in enumerate(pages[:-1], start=1):
            page.next_page_token = f"{snapshot}.{number + 1}"
        self._forget_old()
        self._kept[snapshot] = (self._monotonic(), pages)
        while len(self._kept) > KEPT_SNAPSHOTS:
            self._kept.popitem(last=False)
        return pages

    def page(self, token: str) -> admin_pb2.GetStatusResponse | None:
        """The page `token` names; None when the token is not one of ours or its snapshot was let go."""
        self._forget_old()
        snapshot, _, number = token.rpartition(".")
        kept = self._kept.get(snapshot)
        # ASCII digits, a few of them: "²" is a digit to str.isdigit() and int() refuses it, and int() of
        # thousands of digits raises too.
        if kept is None or not (number.isascii() and number.isdigit() and len(number) <= 6):
            return None
        if not 1 <= int(number) <= len(kept[1]):
            return None
        return kept[1][int(number) - 1]

    def _forget_old(self) -> None:
        now = self._monotonic()
        while self._kept:
            snapshot, (kept_at, _) = next(iter(self._kept.items()))
            if now - kept_at <= KEPT_SECONDS:
                break
            del self._kept[snapshot]
