"""The mismatch-shape report: per bound argument, how often values miss their set, and why (shares by shape).

The window's counts come from CountWindows (copies of the cumulative counters
taken in the background, so a report costs the hot path nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from argwatch.server.policy.model import Policy
from argwatch.server.telemetry.counts import ArgumentCounts, CountTable
from argwatch.server.verdict.findings import Shape

SHAPES = [shape.value for shape in Shape if shape is not Shape.NONE]


@dataclass(frozen=True, slots=True)
class ShapeRow:
    tool: str
    argument: str
    value_set: str
    counts: ArgumentCounts
    shapes: tuple[tuple[str, int, float], ...]  # (shape, count, share of mismatches), largest first


def rows_from_counts(policy: Policy, counts: CountTable) -> list[ShapeRow]:
    """One row per bound argument with checks, in policy order."""
    rows = []
    for tool in policy.tools.values():
        for binding in tool.arguments:
            argument = counts.argument(tool.name, binding.name)
            if not argument.checks:
                continue
            by_shape = {shape: argument.shapes.get(shape, 0) for shape in SHAPES}
            mismatches = sum(by_shape.values())
            shapes = tuple(
                sorted(
                    ((shape, count, count / mismatches) for shape, count in by_shape.items() if count),
                    key=lambda item: (-item[1], item[0]),
                )
            )
            rows.append(
                ShapeRow(
                    tool=tool.name,
                    argument=binding.name,
                    value_set=binding.value_set,
                    counts=argument,
                    shapes=shapes,
                )
            )
    return rows
