"""The mismatch-shape report: per bound argument, how often values miss their set, and why (shares by shape).

The window's counts come from CountWindows (copies of the cumulative counters
taken in the background, so a report costs the hot path nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from argwatch.server.policy.model import Policy
from argwatch.server.verdict.findings import Shape

SHAPES = [shape.value for shape in Shape if shape is not Shape.NONE]

Counts = Mapping[tuple[str, str, str], float]


@dataclass(frozen=True, slots=True)
class ShapeRow:
    tool: str
    argument: str
    value_set: str
    checks: int
    out_of_set: int
    out_of_set_normalised: int
    shapes: tuple[tuple[str, int, float], ...]  # (shape, count, share of mismatches), largest first

    @property
    def out_of_set_rate(self) -> float:
        return self.out_of_set / self.checks if self.checks else 0.0

    @property
    def out_of_set_normalised_rate(self) -> float:
        return self.out_of_set_normalised / self.checks if self.checks else 0.0


def rows_from_counts(policy: Policy, counts: Counts) -> list[ShapeRow]:
    """One row per bound argument with checks, in policy order."""
    rows = []
    for tool in policy.tools.values():
        for binding in tool.arguments:
            key = (tool.name, binding.name)
            checks = int(counts.get((*key, "checks"), 0))
            if not checks:
                continue
            by_shape = {shape: int(counts.get((*key, f"shape:{shape}"), 0)) for shape in SHAPES}
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
                    checks=checks,
                    out_of_set=int(counts.get((*key, "out_of_set"), 0)),
                    out_of_set_normalised=int(counts.get((*key, "out_of_set_normalised"), 0)),
                    shapes=shapes,
                )
            )
    return rows
