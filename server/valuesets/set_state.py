"""What the gateway holds of one value set: its copy, how fresh it is and why not, and the report of it."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from argwatch.server.policy.model import Normalisation, Policy, ValueSetConfig
from argwatch.server.sets.payload import DeltaUpdate
from argwatch.server.sets.snapshot import SetReading, ValueSetSnapshot
from argwatch.server.valuesets.freshness import Refusal, StaleCause


@dataclass(eq=False)
class SetState:
    """Everything held of one set. Owned by the event loop; the snapshot inside is immutable."""

    config: ValueSetConfig
    rules: tuple[Normalisation, ...]
    snapshot: ValueSetSnapshot | None = None
    incarnation: str = ""  # the owner's run of versions the snapshot belongs to (sets/updates.py)
    confirmed_at: float = 0.0  # wall clock, for reports
    confirmed_mono: float = -math.inf  # monotonic, for ages
    healthy: bool = False  # the source confirmed this set at its last word on it
    cause: StaleCause = StaleCause.NOT_LOADED  # why not healthy (NONE while healthy)
    cause_words: str = "not loaded yet: its source has not answered for it"
    refusal: Refusal | None = None  # the last update refused, kept for the record
    transport_error: str = ""  # the last error reaching the source, kept for the record
    transport_error_at: float = 0.0
    transport_error_mono: float = -math.inf  # the same, monotonic: was it before the source came back?
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    resyncing: bool = False
    # While the set's layers are compacted in the background (set_table.py): the deltas layered since the
    # compaction began, to replay over the new base. None when no compaction runs.
    replay: list[DeltaUpdate] | None = None
    save_pending: bool = False
    saved_mono: float = -math.inf
    # The reading handed to the checker, rebuilt only when the snapshot, the
    # confirmation or staleness changes (not once per call).
    reading: SetReading | None = None
    # How many writes to what a reading is made of there have been (__setattr__ counts them); only the
    # event loop writes those fields.
    generation: int = 0
    # (generation, reading, fresh until): the fresh reading a read made at that generation, handed out
    # again while the generation is the same and the monotonic clock is before the time, so the checker's
    # read is one clock look-up. Stored in one assignment, by whichever thread read (a /metrics render reads
    # too): one that read the fields before a write of the loop's stores an older generation, so its
    # reading is never handed out for the state after that write.
    kept: tuple[int, SetReading, float] | None = None

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name in _READING_MADE_OF:
            object.__setattr__(self, "generation", self.generation + 1)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def held(self) -> tuple[str, int] | None:
        """The run of versions and the version held, or None before the first copy."""
        return (self.incarnation, self.snapshot.version) if self.snapshot is not None else None


# What a reading, and whether it is fresh, is made of: set_table.SetTable.read (tests/unit/test_set_reading.py
# holds the two to the same names).
_READING_MADE_OF = frozenset({"config", "snapshot", "confirmed_at", "confirmed_mono", "healthy"})

# What a reload's provider takes over from the one it replaces, for a set configured the same.
CARRIED_OVER = (
    "snapshot", "incarnation", "confirmed_at", "confirmed_mono", "healthy", "cause", "cause_words",
    "refusal", "transport_error", "transport_error_at",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SetStatus:
    """One set's state, for the Admin API."""

    config: ValueSetConfig
    snapshot: ValueSetSnapshot | None
    confirmed_at: float
    age_seconds: float
    stale: bool
    available: bool
    source_connected: bool
    cause: StaleCause
    last_error: str  # the cause in words; "" while fresh
    refusal: Refusal | None
    transport_error: str
    transport_error_at: float


def cause_now(state: SetState, reading: SetReading | None, age: float, back_since: float) -> tuple[StaleCause, str]:
    """Why the copy is not fresh now, and in words; (NONE, "") while it is. `back_since` is when its source
    came back (monotonic; -inf when it has not, or never went away while this set was known)."""
    if reading is not None and not reading.stale:
        return StaleCause.NONE, ""
    if state.healthy:
        if reading is None and state.snapshot is not None:
            return StaleCause.NOT_CONFIRMED, (
                f"not confirmed for {age:.0f}s, over max_staleness {state.config.max_staleness_seconds:g}s"
            )
        return StaleCause.NOT_CONFIRMED, f"not confirmed for {age:.0f}s, over its TTL {state.config.ttl_seconds:g}s"
    if state.cause is StaleCause.SOURCE_UNREACHABLE and state.transport_error_mono < back_since:
        # The source came back after this set's error; the set has not been confirmed since. The error
        # is over. (An error of this set's own since then, such as a resync timing out while the stream
        # is up, is still the cause.)
        return StaleCause.NOT_CONFIRMED, "its source is back and has not confirmed it yet"
    return state.cause, state.cause_words


def rules_by_set(policy: Policy) -> dict[str, tuple[Normalisation, ...]]:
    """Every normalisation some binding applies to each set: its index is built for all of them."""
    rules: dict[str, set[Normalisation]] = {}
    for tool in policy.tools.values():
        for binding in tool.arguments:
            rules.setdefault(binding.value_set, set()).add(binding.normalisation)
    return {name: tuple(found) for name, found in rules.items()}
