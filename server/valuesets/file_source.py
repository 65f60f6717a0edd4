"""Value sets read from a local YAML or JSON file: the demo's (make run), and a fallback for owners without a service.

The file maps set names to their content:

    refunds.reason_codes:
      version: 7            # optional; the file's modification time (ns) when absent
      members: [DAMAGED_ITEM, NOT_RECEIVED]
      retired:              # optional: values once legal
        - BROKEN
        - {value: CUSTOMER_UNHAPPY, retired_at: 2026-10-01, replaced_by: OTHER}
    billing.payment_methods:   # a set the policy scopes (scope: customer_id): members per scope
      scopes:
        cus_000: [pm_visa_4242, pm_sepa_0001]
        cus_001: [pm_amex_0005]
      retired:               # each with its scope
        - {scope: cus_000, value: pm_visa_1111, replaced_by: pm_visa_4242}
"""

from __future__ import annotations

import asyncio
import datetime
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import yaml

from argwatch.common.files import SETS_FILE_BYTES, read_file
from argwatch.server.policy.strict_yaml import DuplicateKeys, load_yaml
from argwatch.server.sets.payload import NotServed, Retirement, SetPayload, SourceUnavailable
from argwatch.server.sets.scoped import MAX_SCOPE_CHARS, scope_key, usable_scope


@dataclass(frozen=True, slots=True)
class _Parsed:
    mtime_ns: int
    size: int
    sets: Mapping[str, SetPayload]


class FileSetFetcher:
    """Reads sets from one file, re-parsing it only when it changed on disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._parsed: _Parsed | None = None

    async def fetch(self, name: str) -> SetPayload:
        parsed = await asyncio.to_thread(self._load)
        payload = parsed.sets.get(name)
        if payload is None:
            raise NotServed(f"{self.path} has no value set {name!r}")
        return payload

    async def close(self) -> None:
        return None

    def _load(self) -> _Parsed:
        try:
            stat = os.stat(self.path)
            if self._parsed and (self._parsed.mtime_ns, self._parsed.size) == (stat.st_mtime_ns, stat.st_size):
                return self._parsed
            document = load_yaml(read_file(self.path, SETS_FILE_BYTES))  # a set given twice is an error
        except (OSError, yaml.YAMLError, DuplicateKeys) as error:
            raise SourceUnavailable(f"cannot read value sets from {self.path}: {error}") from None
        parsed = _Parsed(stat.st_mtime_ns, stat.st_size, parse_sets(document, self.path, stat.st_mtime_ns))
        self._parsed = parsed
        return parsed


def parse_sets(document: object, origin: str, default_version: int) -> dict[str, SetPayload]:
    """Validates a value-set document; raises SourceUnavailable naming the first bad entry."""
    if not isinstance(document, dict):
        raise SourceUnavailable(f"{origin}: expected a mapping of set names to sets")
    sets: dict[str, SetPayload] = {}
    for name, entry in document.items():
        where = f"{origin}: {name}"
        if not isinstance(name, str) or not name or not isinstance(entry, dict):
            raise SourceUnavailable(f"{where}: expected a set name mapped to version/members/retired")
        unknown = set(entry) - {"version", "members", "scopes", "retired"}
        if unknown:
            raise SourceUnavailable(f"{where}: unknown keys {sorted(unknown)}")
        version = entry.get("version", default_version)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise SourceUnavailable(f"{where}.version: expected a whole number >= 0, got {version!r}")
        scoped = "scopes" in entry
        if scoped and "members" in entry:
            raise SourceUnavailable(f"{where}: expected members (a global set) or scopes (a scoped one), not both")
        members = (
            _scoped(entry["scopes"], f"{where}.scopes")
            if scoped
            else _strings(entry.get("members"), f"{where}.members")
        )
        retired, retirements = _retired(entry.get("retired", []), f"{where}.retired", scoped)
        sets[name] = SetPayload(name, version, members, retired, MappingProxyType(retirements), scoped=scoped)
    return sets


def _scoped(value: object, where: str) -> tuple[str, ...]:
    """A scoped set's members as scope keys (sets/scoped.py), from {scope: [members]}."""
    if not isinstance(value, dict):
        raise SourceUnavailable(f"{where}: expected a mapping of each scope to its members")
    keys: list[str] = []
    for scope, members in value.items():
        if not isinstance(scope, str) or not usable_scope(scope):
            raise SourceUnavailable(f"{where}: {scope!r} is no scope (1 to {MAX_SCOPE_CHARS} characters, no NUL)")
        keys.extend(scope_key(scope, member) for member in _strings(members, f"{where}.{scope}"))
    return tuple(keys)


def _retired(value: object, where: str, scoped: bool = False) -> tuple[tuple[str, ...], dict[str, Retirement]]:
    """Retired values: plain strings, or {value, retired_at, replaced_by} mappings (a scoped set's: mappings
    with their scope as well); all of them in the retirements, in the file's order (the order retired, which
    retired_keep keeps the newest of)."""
    if not isinstance(value, list):
        raise SourceUnavailable(f"{where}: expected a list")
    details: dict[str, Retirement] = {}
    for index, item in enumerate(value):
        if scoped:
            item = _scoped_retired(item, f"{where}[{index}]")
        if isinstance(item, str):
            details.pop(item, None)
            details[item] = Retirement(None, "")
            continue
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("value"), str)
            or set(item)
            - {
                "value",
                "retired_at",
                "replaced_by",
            }
        ):
            raise SourceUnavailable(f"{where}[{index}]: expected a string or {{value, retired_at, replaced_by}}")
        replaced_by = item.get("replaced_by", "")
        if not isinstance(replaced_by, str):
            raise SourceUnavailable(f"{where}[{index}].replaced_by: expected a string")
        details.pop(item["value"], None)
        details[item["value"]] = Retirement(_epoch(item.get("retired_at"), f"{where}[{index}].retired_at"), replaced_by)
    return (), details


def _scoped_retired(item: object, where: str) -> dict[str, object]:
    """A scoped set's retired value, {scope, value, ...}, with its value made its scope's key."""
    scope = item.get("scope") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(scope, str) or not usable_scope(scope):
        raise SourceUnavailable(f"{where}: expected {{scope, value, retired_at, replaced_by}} with a usable scope")
    rest = {key: field for key, field in item.items() if key != "scope"}
    if isinstance(rest.get("value"), str):
        rest["value"] = scope_key(scope, rest["value"])
    return rest


def _epoch(value: object, where: str) -> float | None:
    """YAML dates and datetimes, ISO strings, or epoch seconds; None when absent."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        return moment.timestamp()
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        # Not NaN or infinite (YAML's .nan, .inf): a NaN among the dates stopped the age's walk over them.
        return float(value)
    if isinstance(value, str):
        try:
            return _epoch(datetime.datetime.fromisoformat(value), where)
        except ValueError:
            pass
    raise SourceUnavailable(f"{where}: expected a date such as 2026-10-01, got {value!r}")


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SourceUnavailable(f"{where}: expected a list of strings")
    return tuple(value)
