"""What the repeat check of a tool with side effects sees: an operation's record, and a call's sighting of it.

Plain data: state/operations.py keeps the records (in the shared cache) and
makes the sightings; the verdict carries a sighting, and the wire reports it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class OperationOutcome(enum.Enum):
    """How a call turned out, as the agent reported it; the value is the `outcome` metric label."""

    UNREPORTED = "unreported"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Retry(enum.Enum):
    """Why a repeat is let through; the value is the `reason` metric label."""

    NO = ""
    AFTER_FAILURE = "after_failure"
    AFTER_STATUS_CHECK = "after_status_check"


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """The shared memory of one operation (a declared shape: it is stored in Redis as JSON)."""

    key: str
    tool: str
    conversation_id: str  # the scope (state/call_scope.py)
    call_id: str  # the call that may have done it: the first, or the last genuine retry
    seen_at: float  # epoch seconds: replicas compare it
    outcome: OperationOutcome
    calls: int  # calls of the operation seen in the window, repeats included
    window: float  # seconds it is remembered after its last call or report


@dataclass(frozen=True, slots=True)
class Sighting:
    """What the gateway knows of a call's operation when the call arrives."""

    key: str
    earlier: OperationRecord | None  # None: the first call of the operation in the window
    retry: Retry
    shared: bool  # the shared cache answered (or there is none): every replica's calls were seen
    status_tool: str = ""  # the policy's tool for learning whether the earlier call took effect

    @property
    def is_repeat(self) -> bool:
        """A repeat that may do the operation twice: refused in reject mode."""
        return self.earlier is not None and self.retry is Retry.NO
