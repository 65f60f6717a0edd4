"""What a test case's checks see, served in-process: its value sets as a set source, its records as a record source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from argwatch.server.records.lookup_client import Lookup
from argwatch.server.sets.payload import NotServed, SetPayload


class CaseSets:
    """A set fetcher over the case's sets: a set the case does not give is not served, so its check reads
    it as unavailable and fails open or closed as the policy says, as a gateway whose owner lacks it does."""

    def __init__(self, payloads: Mapping[str, SetPayload]) -> None:
        self._payloads = payloads

    async def fetch(self, name: str) -> SetPayload:
        payload = self._payloads.get(name)
        if payload is None:
            raise NotServed(f"the test case gives no value set {name!r}")
        return payload

    async def close(self) -> None:
        return None


class CaseRecords:
    """A record source over the case's records (kind -> id -> attributes): an id it does not hold is not found."""

    def __init__(self, records: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        self._records = records

    def cached(self, kind: str, record_id: str) -> Lookup | None:
        return self._answer(kind, record_id)

    async def lookup_many(self, kind: str, record_ids: Sequence[str], deadline: float | None) -> list[Lookup]:
        return [self._answer(kind, one) for one in record_ids]

    def _answer(self, kind: str, record_id: str) -> Lookup:
        attributes = self._records.get(kind, {}).get(record_id)
        return Lookup(False, {}) if attributes is None else Lookup(True, attributes)
