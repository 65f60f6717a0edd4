"""The mismatch-shape report: per bound argument, how often values miss their set, and why (shares by shape).

Windows cost the hot path nothing: a sampler copies the cumulative counters
every SAMPLE_SECONDS into a ring covering an hour, and a window's figures are
the difference between now and the copy closest to its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from argwatch.server.findings import Shape
from argwatch.server.metrics import GatewayMetrics
from argwatch.server.policy_model import Policy

SAMPLE_SECONDS = 10.0
KEEP_SECONDS = 3600.0
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


class ShapeWindows:
    """Copies of the cumulative counts every SAMPLE_SECONDS, so reports can cover a recent window."""

    def __init__(self, metrics: GatewayMetrics, clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._clock = clock
        self._started = clock()
        self._ring: deque[tuple[float, Counts]] = deque(maxlen=int(KEEP_SECONDS / SAMPLE_SECONDS) + 1)
        self._ring.append((self._started, {}))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample_forever())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def sample(self) -> None:
        self._ring.append((self._clock(), self._metrics.shape_counts()))

    def window(self, seconds: float) -> tuple[Counts, float]:
        """The counts over the last `seconds` (0: since start), and the seconds they actually cover."""
        now = self._clock()
        current = self._metrics.shape_counts()
        if seconds <= 0:
            return current, now - self._started
        start = now - seconds
        base_time, base = self._ring[0]
        for taken_at, counts in self._ring:
            if taken_at > start:
                break
            base_time, base = taken_at, counts
        return {key: value - base.get(key, 0.0) for key, value in current.items()}, now - base_time

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_SECONDS)
            self.sample()
