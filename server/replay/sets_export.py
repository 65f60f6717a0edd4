"""`argwatch sets export`: the policy's value sets, as its owners serve them now, in one file a replay can reuse.

The file is the file source's format (JSON, which is YAML): set name -> version,
members, retired (with when and what replaced each, where the owner says). So
`argwatch replay --sets FILE` judges a corpus against exactly these sets, however
the owners have moved on since, and the same file serves as a `file:` source.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from argwatch.server.policy.model import Policy
from argwatch.server.process.app import limits_of, make_fetcher
from argwatch.server.sets.payload import Retirement
from argwatch.server.sets.scoped import split_key, value_of
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.state.atomic_file import write_atomically
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.valuesets.provider import ValueSetProvider


async def export_sets(
    policy: Policy, path: str, wait_seconds: float = 10.0, *, partial: bool = False
) -> tuple[dict[str, int], list[str]]:
    """Writes every set the owners served within `wait_seconds` to `path` (atomically); returns
    (name -> version written, names not loaded). With a set missing, nothing is written unless `partial`:
    a good export is never replaced by a part of one."""
    metrics = GatewayMetrics(CollectorRegistry())
    fetchers = {source: make_fetcher(config, limits_of(policy, source)) for source, config in policy.sources.items()}
    provider = ValueSetProvider(policy, fetchers, SharedCache(None, metrics), metrics)
    try:
        missing = await provider.start(wait_seconds)
        document = {
            name: _entry(reading.snapshot)
            for name in sorted(policy.value_sets)
            if (reading := provider.read(name)) is not None
        }
    finally:
        await provider.close()
    if missing and not partial:
        return {}, missing
    write_atomically(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    return {name: entry["version"] for name, entry in document.items()}, missing


def _entry(snapshot: ValueSetSnapshot) -> dict[str, Any]:
    retired: list[object] = []
    for value, known in snapshot.retirements.items():  # in the order retired: what retired_keep keeps on import
        if snapshot.scoped:  # the file source's scoped form: each value with its scope
            scope, plain = split_key(value)
            retired.append({"scope": scope, "value": plain, **_known(known)})
            continue
        if known.retired_at is None and not known.replaced_by:
            retired.append(value)
            continue
        retired.append({"value": value, **_known(known)})
    if snapshot.scoped:
        scopes = {scope: sorted(value_of(key) for key in keys) for scope, keys in sorted(snapshot.by_scope.items())}
        return {"version": snapshot.version, "scopes": scopes, "retired": retired}
    return {"version": snapshot.version, "members": list(snapshot.sorted_members), "retired": retired}


def _known(known: Retirement) -> dict[str, object]:
    detail: dict[str, object] = {}
    if known.retired_at is not None:
        detail["retired_at"] = datetime.datetime.fromtimestamp(known.retired_at, datetime.UTC).isoformat()
    if known.replaced_by:
        detail["replaced_by"] = known.replaced_by
    return detail
