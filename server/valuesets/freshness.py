"""Why a set's copy is not fresh, and what one refresh did: the causes the Admin API, the TUI and the log show."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from argwatch.server.sets.scoped import MAX_SCOPE_CHARS


class StaleCause(enum.IntEnum):
    """Mirrors admin.proto StaleCause, value for value."""

    NONE = 0
    NOT_LOADED = 1
    SOURCE_UNREACHABLE = 2
    UPDATE_REFUSED = 3
    TOO_LARGE = 4
    NOT_SERVED = 5
    NOT_CONFIRMED = 6
    SAVED_COPY = 7


class RefreshOutcome(enum.IntEnum):
    """Mirrors admin.proto RefreshOutcome, value for value."""

    NEW_VERSION = 1
    CONFIRMED = 2
    REFUSED = 3
    UNREACHABLE = 4
    NOT_SERVED = 5


@dataclass(frozen=True, slots=True)
class RefreshResult:
    """What one refresh did, and in words."""

    outcome: RefreshOutcome
    detail: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """The last update of a set the gateway refused.

    `incarnation` and `version` name what was refused, so that a heartbeat naming
    the same version again is known as "still the refused one" rather than a
    change to fetch (which fetched an oversized set every heartbeat, forever).
    """

    reason: str  # a reason label of argwatch_value_set_update_rejected_total
    detail: str
    at: float  # wall clock
    incarnation: str
    version: int | None  # None when the update named no usable version
    # Only a whole set refused stands for its version: a refused delta says nothing of the set it leads
    # to, whose full snapshot may well be fine (and is fetched).
    whole_set: bool = True

    def names(self, incarnation: str, version: int) -> bool:
        """Whether a heartbeat naming (incarnation, version) names the set refused (not worth fetching)."""
        return (
            self.whole_set
            and self.version is not None
            and (self.incarnation, self.version)
            == (
                incarnation,
                version,
            )
        )


def refusal_words(reason: str, members: int | None, max_members: int) -> str:
    """A refused update in words, for the Admin API and the log."""
    if reason == "oversized" and members is not None:
        return f"oversized: {members} members, over max_members {max_members}"
    return {
        "version_order": "version_order: a version older than the one held, from the same run of the owner",
        "value_too_long": "value_too_long: a member, retired value or replacement longer than the gateway keeps",
        "too_many_retired": f"too_many_retired: more retired values than max_members {max_members}",
        "parts_oversized": (
            f"parts_oversized: its parts add up to more than max_members {max_members} members or 256 MiB, "
            "or a part after the first is empty or carries retired values"
        ),
        "oversized_delta": "oversized_delta: a delta of more than 100000 values (send such a change as a snapshot)",
        "empty_name": "empty_name: an update naming no set",
        "scope_mismatch": (
            "scope_mismatch: members published per scope for a set the policy does not scope, or bare members "
            "for one it scopes (value_sets.<name>.scope)"
        ),
        "bad_scope": f"bad_scope: a scope that is empty, holds NUL or is longer than {MAX_SCOPE_CHARS} characters",
        "oversized": f"oversized: more members than max_members {max_members}",
    }.get(reason, reason)
