"""How the Admin API and the gateway change modes: on this replica alone, or for the fleet through Redis."""

from __future__ import annotations

from typing import Any, Protocol

from argwatch.server.modes.store import ModeChange, ModeStore
from argwatch.server.policy.model import Mode


class ModeControl(Protocol):
    """What changes modes; the ModeStore itself is what every call reads."""

    kind: str  # where modes are kept: "memory", "file" or "redis"

    async def start(self) -> None: ...

    async def set_mode(
        self,
        target: str,
        mode: Mode | None,
        *,
        actor: str,
        reason: str,
        expires_in: float | None = None,
        check: str = "",
    ) -> ModeChange: ...

    def record_refusal(self, actor: str, reason: str) -> None: ...

    async def audit(self, change: ModeChange) -> None:
        """Adds an entry that is not a mode change (a policy reload) to the audit, fleet-wide when shared."""
        ...

    async def expire_due(self) -> None: ...

    def durability_warning(self, change: ModeChange) -> str:
        """Why `change`, just made by set_mode, may not survive a failover of the store ("" when it will)."""
        ...

    def status(self) -> tuple[bool, str]:
        """(whether the store is reachable, why not)."""
        ...

    def fleet(self) -> list[dict[str, Any]]:
        """Every replica's last report (empty without a shared store)."""
        ...

    async def close(self) -> None: ...


class LocalModes:
    """Modes on this replica only (in memory, or the --mode-state file)."""

    def __init__(self, store: ModeStore, kind: str = "memory") -> None:
        self._store = store
        self.kind = kind

    async def start(self) -> None:
        return None

    async def set_mode(
        self,
        target: str,
        mode: Mode | None,
        *,
        actor: str,
        reason: str,
        expires_in: float | None = None,
        check: str = "",
    ) -> ModeChange:
        return self._store.set_mode(target, mode, actor=actor, reason=reason, expires_in=expires_in, check=check)

    def record_refusal(self, actor: str, reason: str) -> None:
        self._store.record_refusal(actor, reason)

    async def audit(self, change: ModeChange) -> None:
        self._store.audit(change)

    async def expire_due(self) -> None:
        self._store.expire_due()

    def durability_warning(self, change: ModeChange) -> str:
        return ""  # memory or this replica's own file: nothing fails over

    def status(self) -> tuple[bool, str]:
        return True, ""

    def fleet(self) -> list[dict[str, Any]]:
        return []

    async def close(self) -> None:
        return None
