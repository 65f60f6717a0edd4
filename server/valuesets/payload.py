"""What a source hands the provider: one set's content, before indexing, and the errors sources raise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SetPayload:
    """One value set as a source answered it."""

    name: str
    version: int
    members: tuple[str, ...]
    retired: tuple[str, ...] = ()


class SourceUnavailable(Exception):
    """The source could not answer for a set now (down, slow, refused, or does not serve it)."""


class SetFetcher(Protocol):
    """A source of value sets, seen from the provider."""

    async def fetch(self, name: str) -> SetPayload:
        """The set's current content; raises SourceUnavailable when it cannot be had."""
        ...

    async def close(self) -> None:
        """Releases connections."""
        ...
