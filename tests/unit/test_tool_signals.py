"""What a tool's status says now: a retry storm, refusing now, a fail-closed check on an observed tool, the
overrides below the tool, and the source lines above the table."""

from __future__ import annotations

from argwatch.tui.source_lines import short_error, source_lines
from argwatch.tui.status_view import mode_cell, row_cells, row_sources, summary
from argwatch.tui.tool_signals import overrides_text, refusing_share, storm_ratio
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.tui.recorded_admin import incident_status


def tool_with(minute: tuple[int, int], quarter: tuple[int, int], covered: float = 900.0) -> admin_pb2.ToolStatus:
    """A tool whose last minute and last 15 minutes had (calls, repeats)."""
    tool = admin_pb2.ToolStatus(tool="refund_order", mode=pb.MODE_REJECT)
    tool.windows.add(window_seconds=60, covered_seconds=60.0, calls=minute[0], repeats=minute[1])
    tool.windows.add(window_seconds=900, covered_seconds=covered, calls=quarter[0], repeats=quarter[1])
    return tool


def test_a_storm_is_calls_well_above_the_quarter_before_with_retries_rising() -> None:
    # 35/s against 14.6/s in the 14 minutes before, repeats 40 in the minute against 12 in the 14 before.
    assert round(storm_ratio(tool_with((2100, 40), (14400, 52))), 1) == 2.4
    assert storm_ratio(tool_with((2100, 0), (14400, 0))) == 0.0  # more agents, not agents retrying
    assert storm_ratio(tool_with((1300, 40), (14400, 52))) == 0.0  # 21.7/s against 16.6/s: under 1.5x
    assert storm_ratio(tool_with((50, 40), (60, 41))) == 0.0  # a quiet tool: 50 calls after 10
    assert storm_ratio(tool_with((2100, 40), (2100, 40), covered=60.0)) == 0.0  # no history to compare with
    assert storm_ratio(tool_with((2100, 40), (2100, 40), covered=900.0)) == 0.0  # nothing before: not a storm
    # Repairs started count as retries too: a rejected call that the agent sends again.
    tool = tool_with((2100, 0), (14400, 0))
    tool.windows[0].repair_started, tool.windows[1].repair_started = 900, 1000
    assert storm_ratio(tool) > 2


def test_refusing_now_reads_the_last_seconds_and_nothing_once_observed() -> None:
    tool = tool_with((600, 0), (6000, 0))
    tool.windows[0].rejected_rate = 0.9  # the minute still holds the outage
    tool.recent.calls, tool.recent.rejected_rate = 150, 0.0  # the source is back: nothing refused now
    assert refusing_share(tool) == 0.0
    tool.recent.calls = 3  # too few calls now to say a share: the minute says it
    assert refusing_share(tool) == 0.9
    tool.mode = pb.MODE_OBSERVE  # flipped: observe refuses nothing, whatever any window holds
    assert refusing_share(tool) == 0.0
    tool.checks.add(name="arg:reason_code", override_mode="reject")  # but a check in reject does
    assert refusing_share(tool) == 0.9


def test_the_incident_reads_at_one_glance() -> None:
    status = incident_status()
    rows = {(r.tool, r.argument): r for r in (row_cells(source, 60) for source in row_sources(status))}
    assert rows["create_ticket", "requester_id"].flags == ("CLOSED·OBSERVED 31",)  # observed: its calls pass
    assert rows["refund_order", "order_id"].flags[:2] == ("FAIL-CLOSED 560", "STORM 2.4x")  # reject: refused
    refund, ticket, stock = status.tools
    assert mode_cell(stock) == "observe · 1 check reject"
    assert mode_cell(stock, short=True) == "observe +1 ovr"
    (refund_row, *_) = [s for s in row_sources(status) if s.tool_name == "refund_order"]
    assert [f.target for f in refund_row.failures] == ["source:owners"]  # owners serves refunds' reason codes
    assert mode_cell(refund, failures=refund_row.failures) == "reject · refusing 100% · owners fails open"
    # Narrow: a tool that refuses says so first, and marks the overrides below it (the detail lists them).
    assert mode_cell(refund, short=True, failures=refund_row.failures) == "refusing 100%+"
    assert overrides_text(ticket, ()) == ""
    assert source_lines(status) == [
        "SOURCE DOWN directory 10.0.4.20:50071: UNAVAILABLE: Connection refused · sets identity.handles"
        " · tools create_ticket",
        "SOURCE DOWN orders_db 10.0.4.30:50081: UNAVAILABLE: Connection refused · records order, customer"
        " · tools refund_order, create_ticket",
    ]
    assert "identity.handles" not in summary(status)  # named on its source's line, not again as a stale set
    assert "wms.warehouses (too large)" in summary(status)


def test_a_transport_error_reads_as_its_code_and_last_cause() -> None:
    refused = (
        "10.0.4.30:50081 Lookup: UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: "
        "ipv4:10.0.4.30:50081: Failed to connect to remote host: Connection refused"
    )
    assert short_error(refused) == "UNAVAILABLE: Connection refused"
    assert short_error("no message for 30s") == "no message for 30s"


def test_the_detail_lists_each_override_below_the_tool_with_who_why_and_until() -> None:
    from argwatch.tui.detail_screen import _overrides_text

    status = incident_status()
    refund, _ticket, stock = status.tools
    assert _overrides_text(stock, []) == (
        "Overrides below the tool:\n  check arg:warehouse_code in reject, by ana@oncall "
        "(INC-9: refuse invented warehouses), until 2026-11-30 01:23:20 UTC"
    )
    assert _overrides_text(refund, list(status.failure_overrides)).endswith(
        "source:owners fails open, by ana@oncall (INC-9: owners flapping), until 2026-11-30 01:21:20 UTC"
    )
    assert _overrides_text(_ticket, []) == ""  # none: the section is hidden
