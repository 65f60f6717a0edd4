"""The preview's wording, pinned: a count of calls can never be read as a count of refusals (issue 29).

The flip dialog once read "observe would have let through 5017 of 7998 calls
that reject refused": 7,998 was every call, refused or not, and read as
refusals. Every figure of calls a preview prints now says which calls it
counts, and these tests hold every line of every window to that.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from argwatch.server.modes.document import Target
from argwatch.server.modes.preview import Preview, WindowPreview
from argwatch.server.modes.preview_text import lines, window_lines
from argwatch.server.telemetry.call_signatures import NOT_KEPT, CallSignatures

# Each way a preview may print a number of calls, with what the number counts.
QUALIFIED = (
    re.compile(
        r"(?P<n>[\d,]+) calls to .+? on this replica, refused or not; "
        r"the modes in force now would have refused (?P<m>[\d,]+) of them"
    ),
    re.compile(r"it would let through (?P<n>[\d,]+) of those (?P<m>[\d,]+) refused calls"),
    re.compile(r"it would refuse (?P<n>[\d,]+) of the (?P<m>[\d,]+) calls let through now"),
    re.compile(r"(?P<n>[\d,]+) of the calls had problems in combinations not kept"),
)
ANY_CALLS = re.compile(r"[\d,]+ (?:\S+ )?calls")


def _preview(window: WindowPreview) -> Preview:
    return Preview(
        Target("refund_order", "record:order"), "reject", "observe", None, ("refund_order",), [window], {}, [], 0
    )


def test_the_issue_incident_reads_as_calls_then_refusals() -> None:
    window = WindowPreview(60, 60.0, 1204, 1198, 1150, {"unverifiable": 1140, "not_owned": 10}, 0, {}, 0)
    assert window_lines(window, "to refund_order") == [
        "last 1 min: 1,204 calls to refund_order on this replica, refused or not; "
        "the modes in force now would have refused 1,198 of them",
        "  it would let through 1,150 of those 1,198 refused calls: 1,140 unverifiable (source down), 10 not owned",
    ]
    overlapping = WindowPreview(60, 60.0, 40, 40, 35, {"unverifiable": 35, "invented": 5}, 0, {}, 0)
    assert window_lines(overlapping, "to refund_order")[1].endswith(
        "35 unverifiable (source down), 5 invented values (a call with two causes counts under each)"
    )
    assert lines(_preview(window))[0] == (
        "change: refund_order record:order: reject -> observe (the tool's other checks keep theirs)"
    )


@st.composite
def windows(draw: st.DrawFn) -> WindowPreview:
    """A window's figures as the gateway can make them: refused and passing calls, and calls not kept."""
    refused, passing, not_kept = (draw(st.integers(0, 10**7)) for _ in range(3))
    allowed, refusing = draw(st.integers(0, refused)), draw(st.integers(0, passing))
    return WindowPreview(
        draw(st.sampled_from([60, 900])),
        draw(st.floats(1, 900)),
        refused + passing + not_kept,
        refused,
        allowed,
        {"invented": allowed, "unverifiable": allowed // 2},
        refusing,
        {"repeat": refusing},
        not_kept,
    )


@given(window=windows())
def test_every_count_of_calls_says_which_calls_it_counts(window: WindowPreview) -> None:
    for line in lines(_preview(window)):
        qualified = [match.span() for pattern in QUALIFIED for match in pattern.finditer(line)]
        for bare in ANY_CALLS.finditer(line):
            assert any(start <= bare.start() < end for start, end in qualified), line


def test_signatures_past_the_bounds_are_counted_as_not_kept() -> None:
    kept = CallSignatures(max_per_tool=2, max_total=4)  # 2 kept, refund_order's NOT_KEPT, 1 more
    for index in range(5):
        kept.count("refund_order", frozenset({(f"arg:a{index}", "invented", False)}))
    kept.count("lookup", frozenset())
    kept.count("lookup", frozenset({("arg:x", "invented", False)}))  # the total's bound, not the tool's
    counts = kept.counts()
    assert counts[("refund_order", NOT_KEPT)] == 3
    assert counts[("lookup", frozenset())] == 1 and counts[("lookup", NOT_KEPT)] == 1
    assert sum(counts.values()) == 7  # every call counted somewhere


def test_calls_let_through_on_a_tool_whose_repeats_refuse_are_said_to_be_unchecked_for_repeats() -> None:
    window = WindowPreview(60, 60.0, 10, 10, 10, {"unverifiable": 10}, 0, {}, 0)
    preview = _preview(window)
    assert not any("repeats" in line for line in lines(preview))
    preview.repeats_unchecked = True
    assert "  some of those may still be refused as repeats: a refused call's repeat is never looked for" in lines(
        preview
    )
