"""A large set under churn, end to end: the owner changes it value by value, and the gateway keeps every delta
landing while it compacts its layers in the background."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from argwatch.server.policy.loader import parse_policy
from argwatch.server.sets.overlay import COMPACT_MIN, OverlaySet, compaction_due
from argwatch.server.sets.packed import PACK_ABOVE
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.sources import ValueSetCatalog
from tests.conftest import start_source
from tests.service.test_provider import provider_for, until

NAME = "billing.invoice_ids"
SIZE = PACK_ABOVE + 4000  # layered, not rebuilt, on a delta
POLICY = """
sources: {{billing: {{grpc: {{target: "{target}", timeout: 5s}}}}}}
value_sets: {{billing.invoice_ids: {{source: billing, ttl: 1h, max_members: 200000}}}}
tools: {{pay: {{arguments: {{invoice: {{value_set: billing.invoice_ids}}}}}}}}
"""


async def test_deltas_keep_landing_while_the_layers_are_compacted_and_the_result_is_the_owners_set(
    tmp_path: Path,
) -> None:
    catalog = ValueSetCatalog()
    catalog.publish(NAME, [f"inv_{i:06d}" for i in range(SIZE)])
    owner = await start_source(catalog)
    policy = parse_policy(POLICY.format(target=owner.target).encode(), os.path.join(tmp_path, "policy.yaml"))
    provider = provider_for(policy, CollectorRegistry())
    try:
        assert await provider.start(30.0) == []

        def held() -> ValueSetSnapshot:
            reading = provider.read(NAME)
            assert reading is not None
            return reading.snapshot

        def owner_version() -> int:
            published = catalog.get(NAME)
            assert published is not None
            return published.version

        first_base = held().members
        # Enough new members in one delta to make the layers due for compaction.
        catalog.add(NAME, [f"new_{i:06d}" for i in range(COMPACT_MIN + 1)])
        await until(lambda: held().version == owner_version())
        assert compaction_due(held())
        landed_while_due = 0
        for step in range(40):
            catalog.remove(NAME, [f"inv_{step:06d}"], replaced_by={f"inv_{step:06d}": f"new_{step:06d}"})
            catalog.add(NAME, [f"late_{step:06d}"])
            await until(lambda: held().version == owner_version())
            landed_while_due += compaction_due(held())
            if not compaction_due(held()):
                break
        # Some deltas landed while the compaction ran: it did not hold the stream up.
        assert landed_while_due >= 1

        def compacted() -> bool:
            members = held().members
            base = members.base if isinstance(members, OverlaySet) else members
            return base is not first_base and not compaction_due(held())

        await until(compacted, seconds=30.0)
        snapshot, published = held(), catalog.get(NAME)
        assert published is not None and snapshot.version == published.version
        assert set(snapshot.members) == set(published.members) and len(snapshot.members) == len(published.members)
        assert "late_000000" in snapshot.members and "inv_000000" not in snapshot.members
        assert snapshot.loose_index.get("late-000000") == "late_000000"  # the indexes were rebuilt too
        assert snapshot.retirements["inv_000000"].replaced_by == "new_000000"
        assert snapshot.retirements["inv_000000"].retired_at is not None
    finally:
        await provider.close()
        await owner.stop()
