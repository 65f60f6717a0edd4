"""The TUI's rows from a snapshot: health in words, figures per window, the filter, sparklines, durations."""

from __future__ import annotations

from argwatch.tui.status_view import COLUMNS, Row, row_cells, row_sources, sparkline
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.tui.recorded_admin import recorded_status


def build_rows(status: admin_pb2.GetStatusResponse, window: int, query: str = "") -> list[Row]:
    """Every row's cells for `window` seconds (the TUI computes only the rows in view)."""
    return [row_cells(source, window) for source in row_sources(status, query)]


COLUMN = {key: index for index, (_label, key, _width) in enumerate(COLUMNS)}


def cells(tool: str, argument: str, window: int = 60) -> dict[str, str]:
    row = next(r for r in build_rows(recorded_status(), window) if (r.tool, r.argument) == (tool, argument))
    return {key: row.cells[index] for key, index in COLUMN.items()}


def test_an_unhealthy_row_says_why_in_words_and_is_flagged() -> None:
    assignee = cells("create_ticket", "assignee")
    assert assignee["flag"] == "!"
    assert assignee["health"] == "SRC-DOWN FAIL-OPEN 31 NO-SET"  # what to act on first: the source
    assert assignee["mode"] == "observe (override)"
    # 29 of 240 values out of set: over the policy's (and the shipped alert's) 3%.
    assert cells("transfer_stock", "warehouse_code")["health"] == "TOO-LARGE STALE OOS>3%"  # why, then what
    # 9.4% out of set, and repairs abandoned: both ask for attention now (a high rate used to read "ok").
    assert cells("refund_order", "reason_code")["health"] == "OOS>3% ABANDONED 9"
    calm = recorded_status()
    calm.attention_out_of_set_rate = 0.5  # the policy's threshold, raised
    for tool in calm.tools:
        for figures in tool.windows:
            figures.repair_abandoned = 0
    (healthy,) = [r for r in build_rows(calm, 60) if (r.tool, r.argument) == ("refund_order", "reason_code")]
    assert (healthy.cells[COLUMN["flag"]], healthy.cells[COLUMN["health"]]) == (" ", "ok")


def test_figures_follow_the_window() -> None:
    minute, hour = cells("refund_order", "reason_code", 60), cells("refund_order", "reason_code", 3600)
    assert (minute["rate"], minute["oos"], minute["norm"], minute["problems"]) == ("20.0", "9.4", "6.7", "113")
    assert (hour["rate"], hour["problems"], hour["repair"]) == (
        "13.3",
        "4520",
        "3520/360/520",
    )  # succeeded/abandoned/open of 4400 started
    assert cells("refund_order", "order_id")["oos"] == "-"  # no value checks: no rate, not 0%


def test_the_filter_matches_tool_or_argument_names() -> None:
    assert [(r.tool, r.argument) for r in build_rows(recorded_status(), 60, "STOCK")] == [
        ("transfer_stock", "warehouse_code")
    ]
    assert [r.argument for r in build_rows(recorded_status(), 60, "order_id")] == ["order_id"]
    assert build_rows(recorded_status(), 60, "nothing-like-this") == []


def test_a_sparkline_scales_to_its_peak_and_leaves_unchecked_steps_blank() -> None:
    # A quarter of the peak is the third of eight levels.
    assert sparkline([0, 0, 1, 1, 4, 4], [10, 10, 10, 10, 10, 10], width=3) == "▁▃█"
    assert sparkline([0, 0, 0, 0], [0, 0, 10, 10], width=2) == " ▁"


def test_the_summary_shows_the_fleet_its_skew_and_a_replica_that_stopped() -> None:
    from argwatch.tui.status_view import summary
    from argwatch.v1 import admin_pb2

    status = recorded_status()
    status.mode_store, status.mode_store_connected = "redis", True
    for name, version, mode, reporting in (("r-0", 41, "reject", True), ("r-1", 41, "reject", True),
                                           ("r-2", 40, "observe", True), ("r-3", 41, "reject", False)):  # fmt: skip
        replica = status.replicas.add(replica_id=name, reporting=reporting, seconds_since_report=0 if reporting else 35)
        replica.value_set_versions["refunds.reason_codes"] = version
        replica.modes["refund_order"] = mode
        replica.policy_version = "5b9a212ee37d" if name == "r-2" else "f51c1c3ff636"  # r-2 is mid-deploy
    status.foreign_overrides.add(tool="new_tool", mode=pb.MODE_REJECT, actor="ana@oncall", reason="INC-1")
    line = summary(status)
    assert "SKEW policy: f51c1c3ff636 on 2, 5b9a212ee37d on 1" in line
    assert "overrides of tools not in this policy (kept for the replicas that have them): new_tool (reject)" in line
    assert "modes: redis" in line and "fleet: 3 replicas reporting" in line
    assert "STOPPED REPORTING: r-3 (35s)" in line
    assert "SKEW refunds.reason_codes: v41 on 2, v40 on 1" in line
    assert "SKEW mode of refund_order: reject on 2, observe on 1" in line
    status.mode_store_connected = False
    assert "MODE STORE (redis) UNREACHABLE" in summary(status)
    assert "fleet view unknown" in summary(status) and "STOPPED" not in summary(status)
    assert admin_pb2.GetStatusResponse().replicas == []  # no shared store: no fleet part
    assert "fleet" not in summary(recorded_status())
    refused = recorded_status()
    refused.policy_reload_error = "policy.yaml: not valid YAML"
    assert "POLICY RELOAD REFUSED (still serving" in summary(refused) and "not valid YAML" in summary(refused)
    promoted = recorded_status()
    promoted.policy_promoted_from = "policy.next.yaml"
    assert "IS A PROMOTED SHADOW (policy.next.yaml): not in the --policy file" in summary(promoted)
    assert "PROMOTED" not in summary(recorded_status())


def test_an_override_about_to_expire_asks_for_attention() -> None:
    status = recorded_status()
    (ticket,) = [tool for tool in status.tools if tool.tool == "create_ticket"]
    assert "EXPIRES" not in " ".join(r.cells[COLUMN["health"]] for r in build_rows(status, 60))  # 30 min away
    ticket.mode_expires_at.FromSeconds(status.taken_at.seconds + 240)  # 4 minutes away, within the policy's 10
    (row,) = [r for r in build_rows(status, 60) if r.tool == "create_ticket"]
    assert row.cells[COLUMN["health"]].endswith("EXPIRES 4m")


def test_mode_says_how_much_a_tool_refuses_now_whatever_the_window() -> None:
    from argwatch.tui.status_view import mode_cell, refusing_text

    status = recorded_status()
    (refund,) = [tool for tool in status.tools if tool.tool == "refund_order"]
    assert cells("refund_order", "reason_code", 3600)["mode"] == "reject · refusing 9%"  # 110 of 1200, last minute
    assert cells("create_ticket", "assignee")["mode"] == "observe (override)"  # observe refuses nothing
    for figures in refund.windows:  # the owner of a fail-closed record is down: every call refused
        figures.rejected, figures.rejected_rate = figures.calls, 1.0
    (row, *_) = [r for r in build_rows(status, 900) if r.tool == "refund_order"]
    assert row.cells[COLUMN["mode"]] == "reject · refusing 100%" and row.refusing == 1.0
    assert mode_cell(refund, short=True) == "refusing 100%"  # only reject refuses: it names the mode too
    # Never rounded into a figure that says something else: 100% is every call, 0% is none.
    assert [refusing_text(share) for share in (0.0, 0.004, 0.5, 0.996, 1.0)] == [
        "",
        "refusing <1%",
        "refusing 50%",
        "refusing 99%",
        "refusing 100%",
    ]


def test_fail_flags_follow_the_state_now_not_the_windows_counts() -> None:
    status = recorded_status()
    (refund,) = [tool for tool in status.tools if tool.tool == "refund_order"]
    (order_row,) = [a for a in status.arguments if a.argument == "order_id"]
    for figures in order_row.windows:
        figures.problems["check_unavailable"] = 40
    order = next(c for c in refund.checks if c.argument == "order_id")
    (row,) = [r for r in build_rows(status, 60) if r.argument == "order_id"]
    assert row.cells[COLUMN["health"]].startswith("FAIL-CLOSED 40")  # a gateway that does not say: the counts
    order.available_now = True  # the order source answered its latest look-up: recovered
    (row,) = [r for r in build_rows(status, 60) if r.argument == "order_id"]
    assert "FAIL-CLOSED" not in row.cells[COLUMN["health"]]
    assert row.cells[COLUMN["problems"]] == "57"  # the window still counts them: 14 + 3 + 40
