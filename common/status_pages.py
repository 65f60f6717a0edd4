"""A status snapshot's pages joined back into one (the Admin API's clients: the TUI, `argwatch watch`).

The gateway cuts a large snapshot into pages under gRPC's 4 MiB message limit
(server/edge/status_pages.py): each page carries the snapshot's header and as
many of the repeated parts, in order, as fit. These are those parts.
"""

from __future__ import annotations

from argwatch.v1 import admin_pb2

# The repeated fields of GetStatusResponse cut into pages, in the order they are filled.
PAGED_FIELDS = (
    "tools",
    "value_sets",
    "arguments",
    "foreign_overrides",
    "replicas",
    "failure_overrides",
    "sources",
)


def join_pages(pages: list[admin_pb2.GetStatusResponse]) -> admin_pb2.GetStatusResponse:
    """The snapshot the pages (1 to `pages`, in order) were cut from."""
    whole = admin_pb2.GetStatusResponse()
    whole.CopyFrom(pages[0])
    for page in pages[1:]:
        for name in PAGED_FIELDS:
            getattr(whole, name).extend(getattr(page, name))
    whole.page, whole.pages, whole.next_page_token = 1, 1, ""
    return whole
