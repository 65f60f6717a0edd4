"""What the shared cache holds of a pulled set, so several replicas do not each pull it from its source."""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

from argwatch.server.sets.payload import Retirement, SetPayload
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.state.codec import shared_value

SHARED_KEY_PREFIX = "argwatch:valueset:"


@shared_value("value_set")
class SharedCopy(NamedTuple):
    """A pulled set as plain data of a declared shape (Redis holds it as JSON)."""

    name: str
    version: int
    members: tuple[str, ...]
    retired: tuple[str, ...]
    retirements: dict[str, tuple[float | None, str]]
    confirmed_at: float
    incarnation: str = ""
    scoped: bool = False  # members are scope keys (sets/scoped.py)

    @classmethod
    def of(cls, payload: SetPayload, installed: ValueSetSnapshot, confirmed_at: float) -> SharedCopy:
        """What to share of a pulled set: its members as pulled, its retired history as kept (retired_keep)."""
        return cls(
            payload.name,
            payload.version,
            tuple(member for member in payload.members if member not in payload.excluded),
            (),
            {value: tuple(info) for value, info in installed.retirements.items()},  # type: ignore[misc]
            confirmed_at,
            payload.incarnation,
            payload.scoped,
        )

    def payload(self) -> SetPayload:
        retirements = {value: Retirement(*info) for value, info in self.retirements.items()}
        return SetPayload(
            self.name,
            self.version,
            self.members,
            self.retired,
            MappingProxyType(retirements),
            incarnation=self.incarnation,
            scoped=self.scoped,
        )
