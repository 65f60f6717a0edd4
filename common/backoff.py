"""Reconnect delays: exponential with full jitter, so replicas that lost a source together do not return together."""

from __future__ import annotations

import random
from collections.abc import Callable


def backoff_delay(
    attempt: int, *, base: float = 0.2, cap: float = 10.0, rng: Callable[[], float] = random.random
) -> float:
    """Seconds before reconnect attempt `attempt` (1, 2, ...): uniform in [0, min(cap, base * 2^(attempt-1)))."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    return rng() * ceiling
