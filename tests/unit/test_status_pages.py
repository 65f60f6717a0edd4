"""A status snapshot cut into pages under a budget, kept for GetStatus's tokens, and joined back whole."""

from __future__ import annotations

from argwatch.common.status_pages import join_pages
from argwatch.server.edge.status_pages import KEPT_SECONDS, KEPT_SNAPSHOTS, KeptPages, split_status
from argwatch.v1 import admin_pb2


def _snapshot(rows: int) -> admin_pb2.GetStatusResponse:
    status = admin_pb2.GetStatusResponse(replica_id="r1", policy_version="v1")
    for index in range(rows):
        status.tools.add(tool=f"tool_{index}")
        status.arguments.add(tool=f"tool_{index}", argument="a" * 100)
    status.value_sets.add(name="s")
    return status


async def test_pages_stay_within_the_budget_carry_the_header_and_join_back_to_the_snapshot() -> None:
    snapshot = _snapshot(2000)
    pages = await split_status(snapshot, budget=20_000)
    assert len(pages) > 5 and all(page.ByteSize() <= 20_000 + 200 for page in pages)
    assert [(page.page, page.pages) for page in pages] == [(n, len(pages)) for n in range(1, len(pages) + 1)]
    assert all(page.replica_id == "r1" and page.policy_version == "v1" for page in pages)
    joined = join_pages(pages)
    assert (joined.page, joined.pages, joined.next_page_token) == (1, 1, "")
    joined.page = joined.pages = 0
    assert joined == snapshot
    assert (await split_status(_snapshot(3)))[0].pages == 1  # a small snapshot is one page, as before


async def test_kept_pages_are_found_by_their_token_until_let_go() -> None:
    now = [0.0]
    kept = KeptPages(monotonic=lambda: now[0])
    pages = kept.keep(await split_status(_snapshot(2000), budget=50_000))
    token = pages[0].next_page_token
    assert kept.page(token) is pages[1] and pages[-1].next_page_token == ""
    assert kept.page("forged.2") is None and kept.page(token.replace(".2", ".999")) is None
    assert kept.page(token.replace(".2", ".²")) is None and kept.page(token.replace(".2", "." + "9" * 5000)) is None
    for _ in range(KEPT_SNAPSHOTS):  # newer snapshots push the oldest out
        kept.keep(await split_status(_snapshot(2000), budget=50_000))
    assert kept.page(token) is None
    fresh = kept.keep(await split_status(_snapshot(2000), budget=50_000))[0].next_page_token
    now[0] += KEPT_SECONDS + 1
    assert kept.page(fresh) is None
