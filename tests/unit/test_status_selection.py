"""The attention order of a status selection, and the replica modes a narrowed snapshot keeps."""

from __future__ import annotations

from pathlib import Path

from argwatch.server.edge.admin_service import _modes_to_show
from argwatch.server.edge.status_selection import (
    EVERY_TOOL,
    Selection,
    ToolNeeds,
    by_attention,
    cut,
    matching,
    read_selection,
)
from argwatch.server.telemetry.status_windows import AttentionFigures
from argwatch.v1 import admin_pb2
from tests.conftest import make_policy

TOOLS = ["quiet", "busy", "drifting", "refusing", "skipping", "stale", "down", "_unknown"]


def figures(
    calls: float = 0.0, checks: int = 0, out_of_set: int = 0, skipped: int = 0, refused: float = 0.0
) -> AttentionFigures:
    return AttentionFigures(calls, checks, out_of_set, skipped, refused)


def test_attention_ranks_checks_that_cannot_run_then_stale_sets_then_out_of_set_rates() -> None:
    seen = {
        "busy": figures(calls=50.0, checks=100),
        "drifting": figures(calls=1.0, checks=40, out_of_set=10),  # 25%, over 20 checks
        "refusing": figures(calls=2.0, refused=0.5),
        "skipping": figures(calls=1.0, skipped=3),
        "_unknown": figures(calls=99.0, skipped=9),
    }
    order = by_attention(TOOLS, seen, down={"down"}, stale={"stale"}, out_of_set_rate=0.03, min_checks=20)
    assert order == ["skipping", "down", "stale", "drifting", "refusing", "busy", "quiet", "_unknown"]


def test_an_out_of_set_rate_over_too_few_checks_is_not_above_the_threshold() -> None:
    seen = {"drifting": figures(checks=5, out_of_set=5), "busy": figures(calls=10.0)}
    order = by_attention(["busy", "drifting"], seen, down=set(), stale=set(), out_of_set_rate=0.03, min_checks=20)
    assert order == ["drifting", "busy"]  # not "above", but still ranked by its rate before calls per second


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
