"""A replay: recorded calls through the gateway's own Validator, offline, and the figures its counters then hold.

Nothing is re-implemented for the replay. The policy's value sets are loaded by
the gateway's ValueSetProvider, from the owners the policy names (as a gateway
does at start-up) or from a file `argwatch sets export` wrote (so a replay can
be repeated exactly). Each call is judged by the gateway's Validator, and the
figures are read back from the same counters the Admin API's windows read. So a
corpus and production are measured by one predicate, and any difference between
them is in the traffic, not in the code.

Record look-ups and rules ask the policy's system of record, as the gateway
does. Where it cannot be reached, the checks fail open or closed as the policy
says, and the report counts them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.model import Policy
from argwatch.server.process.app import limits_of, make_fetcher, record_clients_for
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.replay.corpus import RecordedCall
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.counts import CountTable, fold
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator import Validator
from argwatch.server.valuesets.file_source import FileSetFetcher
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.tool_call import ToolCall as Call
from argwatch.server.verdict.tool_call import decode_json_arguments

OFFENDERS_KEPT = 5  # per argument, in the report
YIELD_EVERY = 500  # calls between yields to the event loop: the provider's own tasks keep running


@dataclass
class ReplayResult:
    """What the replayed calls came to: the counters folded into the count model, and where sets came from."""

    counts: CountTable = field(default_factory=CountTable)
    calls: int = 0
    seconds: float = 0.0
    sets_from: str = ""
    sets_not_loaded: list[str] = field(default_factory=list)
    why_not_loaded: dict[str, str] = field(default_factory=dict)  # set -> the source's last error
    set_versions: dict[str, int] = field(default_factory=dict)
    # (tool, argument) -> the most frequent offending values: (value as JSON text, count, shape)
    offenders: dict[tuple[str, str], list[tuple[str, int, str]]] = field(default_factory=dict)


async def replay(
    policy: Policy,
    calls: Iterable[RecordedCall],
    *,
    sets_file: str = "",
    wait_seconds: float = 10.0,
    on_call: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Judges every call in `calls` as the gateway would, in the policy's modes; returns the figures."""
    metrics = GatewayMetrics(CollectorRegistry())
    cache = SharedCache(None, metrics)  # this process only: a replay shares nothing with a fleet
    fetchers: Mapping[str, object]
    if sets_file:
        fetchers = {source: FileSetFetcher(sets_file) for source in policy.sources}
    else:
        fetchers = {
            source: make_fetcher(config, limits_of(policy, source)) for source, config in policy.sources.items()
        }
    provider = ValueSetProvider(policy, fetchers, cache, metrics)  # type: ignore[arg-type]
    record_clients = record_clients_for(policy, metrics)
    offenders = OffenderTable()
    validator = Validator(
        policy,
        provider,
        ModeStore(policy),
        metrics,
        SampledValueLog(0.0, 1),  # nothing is sampled: the report keeps the offending values itself
        RejectionLog(cache, policy.repair),
        record_clients,
        offenders,
    )
    result = ReplayResult(sets_from=sets_file or "the policy's sources")
    try:
        result.sets_not_loaded = await provider.start(wait_seconds)
        result.why_not_loaded = {name: provider.last_error(name) for name in result.sets_not_loaded}
        result.set_versions = {
            name: reading.snapshot.version for name in policy.value_sets if (reading := provider.read(name)) is not None
        }
        started = time.perf_counter()
        for index, recorded in enumerate(calls, start=1):
            arguments, error = decode_json_arguments(recorded.arguments_json)
            call = Call(
                recorded.tool,
                arguments,
                f"replay-{index}",
                recorded.conversation_id,
                recorded.customer_id,
                recorded.tenant,
                error,
                recorded.arguments_json,
                recorded.model,
                recorded.prompt_version,
            )
            await validator.validate(call)
            result.calls = index
            if index % YIELD_EVERY == 0:
                if on_call is not None:
                    on_call(index)
                await asyncio.sleep(0)
        result.seconds = time.perf_counter() - started
        result.counts = fold(metrics.counts())
        result.offenders = {
            key: [(row.value, row.count, row.shape) for row in offenders.offenders(*key, OFFENDERS_KEPT).rows]
            for key in offenders.keys()  # noqa: SIM118 (an OffenderTable, not a dict)
        }
    finally:
        await provider.close()
        for client in record_clients.values():
            await client.close()
    return result
