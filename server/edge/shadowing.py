"""What the Admin API needs of the shadow's control (process/shadow_control.py builds it), and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from argwatch.server.edge.reloading import ReloadResult
from argwatch.server.shadow.report import ReportSnapshot


class ShadowRefused(Exception):
    """The shadow asked for cannot be used; the message says why (nothing changed)."""


@dataclass(frozen=True, slots=True)
class ShadowSet:
    """What setting a shadow did."""

    version: str
    previous_version: str  # "" when there was none
    unavailable_sets: tuple[str, ...]  # not loaded yet: its checks of them fail open or closed, and are counted


@dataclass(frozen=True, slots=True)
class PolicyDiff:
    """What promoting the shadow would change: the tools it adds, removes and changes."""

    live_version: str
    shadow_version: str
    tools_added: tuple[str, ...]
    tools_removed: tuple[str, ...]
    tools_changed: tuple[str, ...]


class ShadowAdmin(Protocol):
    """Set, clear, report and promote the shadow of the running gateway."""

    async def set_text(self, raw: bytes, name: str, actor: str, reason: str) -> ShadowSet: ...

    async def clear(self, actor: str, reason: str) -> str: ...

    def report(self) -> ReportSnapshot | None: ...

    def diff(self) -> PolicyDiff | None: ...

    async def promote(self, actor: str, reason: str, expected_version: str) -> ReloadResult: ...
