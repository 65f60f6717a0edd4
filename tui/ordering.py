"""The main table's order: worst first, a tool's rows together, and the keys on-call may sort by instead.

Rows came in the gateway's order: `refund_order _call` sat below `_unknown _call`, away from its
tool's other rows, and a set failing open could be forty rows down. Now every tool's rows stay
together; tools are ordered by their worst row, and rows within a tool the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from argwatch.tui.status_view import NO_ARGUMENT, RowSource, health_flags, window_of

# (key, shown as): `s` cycles through them.
SORTS = (
    ("attention", "attention"),
    ("oos", "out-of-set rate"),
    ("rate", "calls/s"),
    ("open", "fail-open"),
    ("name", "name"),
)
SORT_NAMES = dict(SORTS)

Rank = tuple[float, ...]
# How much each HEALTH flag weighs when rows are ranked by attention: checks that are not running first,
# then sets in trouble, then what the model or on-call should look at.
SEVERITY = (
    (("FAIL-OPEN", "FAIL-CLOSED", "NO-SET"), 100),
    (("SRC-DOWN", "STALE", "REFUSED", "TOO-LARGE", "NOT-SERVED", "UNCONFIRMED", "SAVED-COPY"), 10),
    (("OOS>",), 5),
    (("ABANDONED", "EXPIRES"), 3),
)


def severity(flags: list[str]) -> int:
    """The weight of a row's flags: 0 for a row that needs nothing."""
    return sum(weight for flag in flags for prefixes, weight in SEVERITY if flag.startswith(prefixes))


def _rank(sort: str, window: int) -> Callable[[RowSource], Rank]:
    """A row's rank under `sort`: lower comes first."""

    def rank(source: RowSource) -> Rank:
        tool = window_of(source.tool, window)
        figures = window_of(source.argument, window) if source.argument is not None else tool
        oos = figures.out_of_set / figures.value_checks if figures.value_checks else 0.0
        if sort == "attention":
            return (-severity(health_flags(source, window)), -oos, -tool.per_second)
        if sort == "oos":
            return (-oos, -tool.per_second)
        if sort == "rate":
            return (-tool.per_second, -oos)
        if sort == "open":
            return (-float(figures.failed_open), -oos)
        return ()

    return rank


def order_rows(sources: Sequence[RowSource], sort: str, window: int) -> list[RowSource]:
    """`sources` with each tool's rows together: tools by their first row's rank, rows within by rank;
    ties keep the gateway's order (the policy's). `_unknown`, not a tool of the policy, goes last."""
    rank = _rank(sort, window)
    ranked = {source.key: rank(source) for source in sources}
    by_tool: dict[str, list[RowSource]] = {}
    for source in sources:
        by_tool.setdefault(source.tool_name, []).append(source)
    for rows in by_tool.values():
        # The tool's own row ("-" or "_call") after its arguments when they tie: arguments say more.
        rows.sort(key=lambda s: (ranked[s.key], s.argument_name in (NO_ARGUMENT, "_call")))
    tools = list(by_tool)
    if sort == "name":
        tools.sort()
    else:
        tools.sort(key=lambda name: ranked[by_tool[name][0].key])
    tools.sort(key=lambda name: name == "_unknown")
    return [row for name in tools for row in by_tool[name]]
