"""Each source the policy names, as the status shows it: connected or not, its last transport error, what it serves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from argwatch.server.edge import wire
from argwatch.server.policy.model import FileSourceConfig, Policy
from argwatch.server.records.lookup_client import RecordClient
from argwatch.server.valuesets.set_state import SetStatus
from argwatch.v1 import admin_pb2

VALUE_SETS = "value_sets"
RECORDS = "records"


def source_statuses(
    policy: Policy, sets: Sequence[SetStatus], record_clients: Mapping[str, RecordClient]
) -> list[admin_pb2.SourceStatus]:
    """One entry per source and kind it serves, in policy order: the sets' follower and the record look-ups
    are separate connections, so a source serving both may be half down."""
    found = []
    for name, config in policy.sources.items():
        address = config.path if isinstance(config, FileSourceConfig) else config.target
        its_sets = [state for state in sets if state.config.source == name]
        if its_sets:
            set_names = [state.config.name for state in its_sets]
            entry = admin_pb2.SourceStatus(
                name=name,
                kind=VALUE_SETS,
                address=address,
                connected=all(state.source_connected for state in its_sets),
                value_sets=set_names,
                tools=[t.name for t in policy.tools.values() if any(b.value_set in set_names for b in t.arguments)],
            )
            latest = max(its_sets, key=lambda state: state.transport_error_at)
            if latest.transport_error:
                entry.last_transport_error = latest.transport_error
                entry.last_transport_error_at.CopyFrom(wire.timestamp(latest.transport_error_at))
            found.append(entry)
        client = record_clients.get(name)
        if client is not None:
            kinds = list(dict.fromkeys(r.kind for t in policy.tools.values() for r in t.records if r.source == name))
            entry = admin_pb2.SourceStatus(
                name=name,
                kind=RECORDS,
                address=address,
                connected=client.answering,
                record_kinds=kinds,
                tools=[t.name for t in policy.tools.values() if any(r.source == name for r in t.records)],
            )
            if client.last_error:
                entry.last_transport_error = client.last_error
                entry.last_transport_error_at.CopyFrom(wire.timestamp(client.last_error_at))
            found.append(entry)
    return found
