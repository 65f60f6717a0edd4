"""Which tools a status snapshot carries (Admin's StatusSelection): matched by name, ordered, then cut.

With 10,000 tools a whole snapshot was 6 MB in two pages and took the
gateway over a second to build, most of it the argument rows' windows, for a
screen that shows a few dozen rows. A selection names the tools to carry: the
ones whose name, or an argument's, contains some text; in policy order, or
the ones most in need of on-call first; a page of them. Only the tools
carried have their counts folded and their rows built.

The attention order is worked out from a few counts per tool (status_windows'
`attention`) and the state of the sets and sources now; it ranks as the TUI's
attention sort does at its coarsest, so that the tools the TUI would put on
top are among those it is sent. The TUI then orders what it gets by its own,
finer rank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from argwatch.server.policy.model import Policy
from argwatch.server.telemetry.status_windows import AttentionFigures
from argwatch.v1 import admin_pb2

MAX_CONTAINS = 200  # characters of StatusSelection.contains


class Selection(NamedTuple):
    contains: str  # lower case
    attention: bool  # TOOL_ORDER_ATTENTION
    skip: int
    most: int  # 0: every tool

    @property
    def narrows(self) -> bool:
        """Whether it may leave a tool out (otherwise the snapshot is every tool's, as without one)."""
        return bool(self.contains or self.skip or self.most)


EVERY_TOOL = Selection("", False, 0, 0)


def read_selection(message: admin_pb2.StatusSelection) -> Selection:
    """The request's selection; ValueError (INVALID_ARGUMENT) with the reason for one the gateway refuses."""
    if len(message.contains) > MAX_CONTAINS:
        raise ValueError(f"selection.contains is {len(message.contains)} characters; at most {MAX_CONTAINS}")
    return Selection(
        message.contains.strip().lower(),
        message.order == admin_pb2.TOOL_ORDER_ATTENTION,
        message.skip_tools,
        message.max_tools,
    )


def matching(tools: Iterable[str], contains: str, searchable: Callable[[str], str]) -> list[str]:
    """The tools whose `searchable` text (their name and argument names, lower case) contains `contains` (lower
    case), in their order."""
    if not contains:
        return list(tools)
    return [tool for tool in tools if contains in searchable(tool)]


class ToolNeeds:
    """What each tool's checks read, inverted: the tools per set ("set:<name>") and per record source
    ("source:<name>"), so that the tools a set or source down touches are found without a pass over every tool.
    Made once per policy."""

    def __init__(self, policy: Policy) -> None:
        self.tools_of: dict[str, list[str]] = {}
        for name, tool in policy.tools.items():
            needs = {f"set:{binding.value_set}" for binding in tool.arguments}
            needs |= {f"source:{record.source}" for record in tool.records}
            for need in needs:
                self.tools_of.setdefault(need, []).append(name)

    def cannot_run_now(self, can_run: set[str]) -> set[str]:
        """The tools with a check that cannot run now: a bound set unavailable, a record source not answering
        (`can_run` as admin_service's _checks_that_can_run gives it)."""
        return {tool for need, tools in self.tools_of.items() if need not in can_run for tool in tools}

    def with_stale_sets(self, stale_sets: Iterable[str]) -> set[str]:
        """The tools bound to a set whose copy is stale."""
        return {tool for name in stale_sets for tool in self.tools_of.get(f"set:{name}", ())}


def by_attention(
    tools: Sequence[str],
    figures: Mapping[str, AttentionFigures],
    *,
    down: set[str],
    stale: set[str],
    out_of_set_rate: float,
    min_checks: int,
) -> list[str]:
    """`tools` most in need of on-call first (admin.proto's TOOL_ORDER_ATTENTION); ties in their order. Calls
    naming a tool the policy does not have ("_unknown") rank as a tool's do, by what they show."""
    quiet = AttentionFigures(0.0, 0.0, 0, 0, 0.0)

    def rank(tool: str) -> tuple[bool, bool, bool, float, float, float]:
        seen = figures.get(tool, quiet)
        above = seen.worst_checks >= min_checks and seen.worst_out_of_set_rate > out_of_set_rate
        return (
            not (tool in down or seen.skipped > 0),
            tool not in stale,
            not above,
            -seen.worst_out_of_set_rate,
            -seen.refused_share,
            -seen.calls_per_second,
        )

    return sorted(tools, key=rank)


def named_first(tools: Sequence[str], contains: str) -> list[str]:
    """`tools` with the one named exactly `contains` first, then those whose name starts with it: "send" must not
    be lost among two hundred tools named send_*."""
    if not contains:
        return list(tools)
    exact = [tool for tool in tools if tool.lower() == contains]
    prefix = [tool for tool in tools if tool.lower().startswith(contains) and tool.lower() != contains]
    chosen = {*exact, *prefix}
    return [*exact, *prefix, *(tool for tool in tools if tool not in chosen)]


def cut(tools: Sequence[str], selection: Selection) -> list[str]:
    """The page of `tools` the selection asks for."""
    end = selection.skip + selection.most if selection.most else None
    return list(tools[selection.skip : end])
