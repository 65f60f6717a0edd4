"""What the Admin API needs of a policy reloader (process/reload.py builds it): reload now, and how the last went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What a reload did."""

    outcome: str  # "reloaded", "unchanged", "refused: <why>"
    policy_version: str
    previous_version: str
    tools_added: tuple[str, ...] = ()
    tools_removed: tuple[str, ...] = ()
    tools_changed: tuple[str, ...] = ()


@dataclass(slots=True)
class ReloadState:
    """When the policy in use was loaded, and the last reload refused (for GetStatus)."""

    loaded_at: float
    refused: str = ""
    refused_at: float = 0.0
    # The promoted shadow's name while it is the policy in use: not what the --policy file holds, which a
    # reload or a restart serves again ("" once the file is served).
    promoted_from: str = ""


class Reloader(Protocol):
    """Reloads the policy of the running gateway (ReloadPolicy), and says how the last reload went (GetStatus)."""

    @property
    def state(self) -> ReloadState: ...

    async def reload(self, actor: str, reason: str) -> ReloadResult: ...
