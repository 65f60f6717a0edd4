"""The main table at any width: the columns on-call needs always show, numbers are never cut, worst rows first."""

from __future__ import annotations

import pytest

from argwatch.tui.layout import ALWAYS, compact_count, fit_flags, layout
from argwatch.tui.ordering import order_rows
from argwatch.tui.status_view import COLUMNS, WIDTHS, row_sources
from tests.tui.recorded_admin import recorded_status

ORDER = [key for _label, key, _width in COLUMNS]
LABELS = {key: label for label, key, _width in COLUMNS}


def widths() -> dict[str, int]:
    found = {key: max(width, len(LABELS[key])) for key, width in WIDTHS.items()}
    found["tool"], found["argument"] = len("transfer_stock"), len("warehouse_code")
    return found


@pytest.mark.parametrize("width", [80, 100, 120, 160, 200, 260])
def test_the_columns_on_call_needs_show_at_every_width_and_nothing_overflows(width: int) -> None:
    shown = layout(width, widths(), ORDER)
    assert set(ALWAYS) <= set(shown.columns)
    assert list(shown.columns) == [key for key in ORDER if key in shown.columns]  # the table's own order
    used = sum(shown.widths[key] + 2 for key in shown.columns)
    assert used <= width - 2, (width, used, shown)  # every column whole: nothing clipped at the edge
    assert shown.widths["health"] >= 16


def test_more_width_adds_columns_in_order_of_use() -> None:
    narrow, middle, wide = (layout(width, widths(), ORDER) for width in (80, 120, 200))
    assert narrow.short_modes and not middle.short_modes
    assert set(narrow.columns) < set(middle.columns) < set(wide.columns)
    assert "rate" in middle.columns and "open" in middle.columns  # calls/s and fail-open come first
    assert set(wide.columns) == set(ORDER)


def test_a_number_is_never_cut_into_another() -> None:
    assert compact_count(97, 3) == "97"
    assert compact_count(97_212, 3) == "97k"
    assert compact_count(97_212, 5) == "97212"
    assert compact_count(197_212, 5) == "197k"
    assert compact_count(1_297_212, 5) == "1297k"
    assert compact_count(12_297_212, 5) == "12.3M"
    assert compact_count(4_500_000, 4) == "4.5M"
    assert compact_count(10**12, 3) == "###"  # past every unit: plainly not a number


def test_health_shows_whole_flags_and_says_how_many_more() -> None:
    flags = ["FAIL-OPEN 31", "NO-SET", "SRC-DOWN"]
    assert fit_flags(flags, 40) == "FAIL-OPEN 31 NO-SET SRC-DOWN"
    assert fit_flags(flags, 24) == "FAIL-OPEN 31 NO-SET +1"
    assert fit_flags(flags, 20) == "FAIL-OPEN 31 +2 more"
    assert fit_flags(flags, 16) == "FAIL-OPEN 31 +2"
    assert fit_flags(flags, 8) == "3 flags"  # never "FAIL-OPEN 3", a count cut into another
    # Narrower than any whole flag: the first one's word, its count left out rather than cut.
    assert fit_flags(["FAIL-CLOSED 40", "NO-SET"], 14) == "FAIL-CLOSED +1"
    assert fit_flags(["FAIL-CLOSED 40"], 13) == "FAIL-CLOSED"
    assert fit_flags(["SRC-DOWN", "STALE", "OOS>3%"], 13) == "SRC-DOWN +2"


def test_long_argument_names_at_80_columns_narrow_health_rather_than_push_it_off_the_screen() -> None:
    """The demo's `payment_method_id` at 80 columns: HEALTH read "SRC-DOWN +2 mo", cut at the edge."""
    found = widths()
    found["tool"], found["argument"] = len("get_refund_status"), len("payment_method_id")
    shown = layout(80, found, ORDER)
    assert sum(shown.widths[key] + 2 for key in shown.columns) <= 78
    assert shown.widths["health"] >= len("SRC-DOWN +2")


def test_worst_first_with_each_tools_rows_together() -> None:
    sources = row_sources(recorded_status())
    ordered = [(s.tool_name, s.argument_name) for s in order_rows(sources, "attention", 60)]
    # create_ticket's assignee fails open on a set that is gone (3 flags); transfer_stock's set is stale and
    # too large (2); refund_order has none, and its rows follow by out-of-set rate.
    assert ordered[0] == ("create_ticket", "assignee")
    tools = [tool for tool, _ in ordered]
    assert tools == sorted(tools, key=tools.index)  # each tool's rows together
    assert tools.index("create_ticket") < tools.index("transfer_stock") < tools.index("refund_order")
    by_name = [tool for tool, _ in ((s.tool_name, s.argument_name) for s in order_rows(sources, "name", 60))]
    assert by_name == sorted(by_name)
