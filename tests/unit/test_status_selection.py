"""The attention order of a status selection, and the replica modes a narrowed snapshot keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from argwatch.server.edge.admin_service import (
    MAX_SHARED_SECONDS,
    STATUS_LOOP_SHARE,
    WATCHED_SECONDS,
    _modes_to_show,
    shared_age,
)
from argwatch.server.edge.status_selection import (
    EVERY_TOOL,
    Selection,
    ToolNeeds,
    by_attention,
    cut,
    matching,
    named_first,
    read_selection,
)
from argwatch.server.telemetry.status_windows import AttentionFigures
from argwatch.v1 import admin_pb2
from tests.conftest import make_policy

TOOLS = ["quiet", "busy", "drifting", "refusing", "skipping", "stale", "down", "_unknown"]


def figures(
    calls: float = 0.0, rate: float = 0.0, checks: int = 0, skipped: int = 0, refused: float = 0.0
) -> AttentionFigures:
    return AttentionFigures(calls, rate, checks, skipped, refused)


def test_attention_ranks_checks_that_cannot_run_then_stale_sets_then_out_of_set_rates() -> None:
    seen = {
        "busy": figures(calls=50.0, checks=100),
        "drifting": figures(calls=1.0, rate=0.25, checks=40),  # its worst argument: 25% over 40 checks
        "refusing": figures(calls=2.0, refused=0.5),
        "skipping": figures(calls=1.0, skipped=3),
        "_unknown": figures(calls=3.0),  # ranked by what it shows, as a tool is
    }
    order = by_attention(TOOLS, seen, down={"down"}, stale={"stale"}, out_of_set_rate=0.03, min_checks=20)
    assert order == ["skipping", "down", "stale", "drifting", "refusing", "busy", "_unknown", "quiet"]


def test_an_out_of_set_rate_over_too_few_checks_is_not_above_the_threshold() -> None:
    seen = {"drifting": figures(rate=1.0, checks=5), "busy": figures(calls=10.0), "above": figures(rate=0.5, checks=30)}
    tools = ["busy", "drifting", "above"]
    order = by_attention(tools, seen, down=set(), stale=set(), out_of_set_rate=0.03, min_checks=20)
    assert order == ["above", "drifting", "busy"]  # not "above", but still ranked by its rate before calls


def test_a_name_given_whole_comes_first_then_the_names_it_starts() -> None:
    tools = ["resend", "send_mail", "send", "unsend_all", "send_sms"]
    assert named_first(tools, "send") == ["send", "send_mail", "send_sms", "resend", "unsend_all"]
    assert named_first(tools, "") == tools


def test_a_selection_reads_matches_and_cuts() -> None:
    selection = read_selection(admin_pb2.StatusSelection(contains=" Refund ", skip_tools=1, max_tools=1))
    assert selection == Selection("refund", False, 1, 1) and selection.narrows
    assert not EVERY_TOOL.narrows
    arguments = {"refund_order": "refund_order\nreason_code", "lookup": "lookup\nrefund_id", "other": "other\nx"}
    matched = matching(arguments, selection.contains, arguments.__getitem__)
    assert matched == ["refund_order", "lookup"]
    assert cut(matched, selection) == ["lookup"]


def test_a_narrowed_snapshot_keeps_the_modes_shown_and_the_ones_replicas_disagree_on() -> None:
    fleet = [
        {"reporting": True, "modes": {"a": "observe", "b": "reject", "c": "observe", "d": "observe"}},
        {"reporting": True, "modes": {"a": "observe", "b": "observe", "c": "observe"}},
        {"reporting": False, "modes": {"a": "reject", "c": "reject"}},  # stopped: its modes are no skew
    ]
    assert _modes_to_show(fleet, ["c"]) == {"c", "b", "d"}


def test_the_tools_a_set_down_or_stale_touches(tmp_path: Path) -> None:
    needs = ToolNeeds(make_policy(str(tmp_path), "127.0.0.1:1"))
    every = {"set:refunds.reason_codes", "set:identity.handles", "set:wms.warehouses"}
    assert needs.cannot_run_now(every) == set()
    assert needs.cannot_run_now(every - {"set:identity.handles"}) == {"create_ticket"}
    assert needs.with_stale_sets(["wms.warehouses", "no.such.set"]) == {"transfer_stock"}


def test_watched_selections_share_one_budget_of_the_loop() -> None:
    every, narrow, gone = ("", True, 0, 200), ("ticket", True, 0, 200), ("", False, 0, 0)
    builds = {every: 0.05, narrow: 0.01, gone: 1.0}
    served = {every: 100.0, narrow: 99.0, gone: 100.0 - WATCHED_SECONDS - 1}  # nobody watches `gone` now
    # Two watched: each is shared twice its own build's time over the loop share, so together they keep to it.
    assert shared_age(every, builds, served, 100.0) == pytest.approx(2 * 0.05 / STATUS_LOOP_SHARE)
    assert shared_age(narrow, builds, served, 100.0) == pytest.approx(2 * 0.01 / STATUS_LOOP_SHARE)  # stays fresh
    assert shared_age(every, {every: 0.05}, {every: 100.0}, 100.0) == pytest.approx(0.05 / STATUS_LOOP_SHARE)
    assert shared_age(gone, builds, served, 100.0) == MAX_SHARED_SECONDS  # a costly one: capped
