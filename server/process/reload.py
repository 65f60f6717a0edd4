"""Policy reloads without a restart: SIGHUP and Admin.ReloadPolicy read the file again and swap it in whole, or not.

A reload builds everything that depends on the policy beside what serves now:
a value-set provider (taking over the copies of every set configured the
same, so nothing is fetched again before it serves), record clients, and a
validator. Only then is it swapped in, by replacing one reference in each
servicer: a call in flight finishes on the policy it started on, and the next
call sees the new one whole. Then the old provider is closed, and the old record
clients once the grace period has let their last look-ups end.

A policy that does not load (bad YAML, an undefined set, a regex the linear
engine refuses) is refused: the policy in use keeps serving, as OPA keeps its
last good bundle, and the refusal is logged, audited, counted and shown in
GetStatus. Metrics of tools and sets the new policy removes are dropped; new
tools get their series at 0 at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from argwatch.common.tasks import cancel_and_wait
from argwatch.server.edge.reloading import ReloadResult, ReloadState
from argwatch.server.modes.document import POLICY_TARGET as AUDIT_TARGET
from argwatch.server.modes.store import ModeChange
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import Policy
from argwatch.server.process.daemon_call import call_with_deadline
from argwatch.server.process.gil_handover import handing_over_often
from argwatch.server.validator.tool_meters import tool_meters_in_turns

if TYPE_CHECKING:
    from argwatch.server.process.app import RunningGateway
    from argwatch.server.records.lookup_client import RecordClient
    from argwatch.server.valuesets.provider import ValueSetProvider

log = logging.getLogger("argwatch.reload")

# A reloaded policy waits this long at most for sets it adds (as start-up waits for every set).
NEW_SETS_WAIT_SECONDS = 5.0
# Reading and validating the policy file may take this long (thousands of tools take seconds); past it the
# reload is refused and the policy in use keeps serving.
LOAD_SECONDS = 120.0


class PolicyReloader:
    """Reloads the policy of one running gateway; one reload at a time."""

    def __init__(self, gateway: RunningGateway, clock: Callable[[], float] = time.time) -> None:
        self._gateway = gateway
        self._clock = clock
        self._lock = asyncio.Lock()
        self.state = ReloadState(loaded_at=clock())
        self._retiring: dict[asyncio.Task[None], Mapping[str, RecordClient]] = {}
        self._running: set[asyncio.Task[ReloadResult]] = set()

    async def reload(self, actor: str, reason: str) -> ReloadResult:
        """Reloads, logs, counts and audits; one reload at a time, in the order asked."""
        # A task of its own, shielded: a caller that gives up (a client deadline) must not cancel a reload
        # halfway, between building the new policy's parts and swapping them in, nor skip its audit.
        task = asyncio.get_running_loop().create_task(self._reload_and_record(actor, reason))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return await asyncio.shield(task)

    async def _reload_and_record(self, actor: str, reason: str) -> ReloadResult:
        async with self._lock:  # audits in the order the reloads happened
            return await self._record(await self._reload_safely(self._reload), actor, reason)

    async def promote(
        self, policy: Policy, actor: str, reason: str, provider: ValueSetProvider | None = None
    ) -> ReloadResult:
        """Serves `policy` (the shadow's, already loaded) through the same swap as a reload, logged, counted
        and audited as one; its sets start from `provider`'s copies (the shadow's) as well as the live ones.
        The file at settings.policy is not written: a later reload reads that file again, and serves what it
        holds (docs/operating.md)."""
        task = asyncio.get_running_loop().create_task(self._promote_and_record(policy, actor, reason, provider))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return await asyncio.shield(task)

    async def _promote_and_record(
        self, policy: Policy, actor: str, reason: str, provider: ValueSetProvider | None
    ) -> ReloadResult:
        async with self._lock:
            result = await self._reload_safely(lambda: self._serve(policy, provider))
            recorded = await self._record(result, actor, f"promoted from the shadow: {reason}")
            if recorded.outcome == "reloaded":
                self.state.promoted_from = policy.path or "(no name)"
            return recorded

    async def _record(self, result: ReloadResult, actor: str, reason: str) -> ReloadResult:
        gateway = self._gateway
        if result.outcome.startswith("refused"):
            self.state.refused, self.state.refused_at = result.outcome.removeprefix("refused: "), self._clock()
            log.error("policy reload refused; still serving %s: %s", result.previous_version, result.outcome)
        elif result.outcome == "reloaded":
            self.state = ReloadState(loaded_at=self._clock())
            log.warning(
                "policy reloaded: %s -> %s (tools added %s, removed %s, changed %s)",
                result.previous_version,
                result.policy_version,
                list(result.tools_added) or "none",
                list(result.tools_removed) or "none",
                list(result.tools_changed) or "none",
            )
        else:
            self.state.refused = ""  # the file was fixed back: the refusal is over
            log.info("policy reload: the file holds the policy in use (%s)", result.policy_version)
        gateway.metrics.policy_reloaded(result.outcome.split(":", 1)[0])
        await gateway.control.audit(
            ModeChange(
                at=self._clock(),
                actor=actor,
                target=AUDIT_TARGET,
                old=result.previous_version,
                new=result.policy_version,
                reason=f"{reason} (replica {gateway.settings.replica_id})",
                expires_at=None,
                outcome=result.outcome,
            )
        )
        return result

    async def close(self) -> None:
        """At shutdown: a reload under way is cancelled (and cleans up after itself); the record clients
        waiting to retire are closed now."""
        await cancel_and_wait(list(self._running))
        retiring, self._retiring = self._retiring, {}
        await cancel_and_wait(list(retiring))
        for clients in retiring.values():
            for client in clients.values():
                await client.close()

    async def _reload_safely(self, reload: Callable[[], Awaitable[ReloadResult]]) -> ReloadResult:
        """`reload`, where anything that goes wrong is a refusal (the policy in use keeps serving), never a
        reload half done."""
        old = self._gateway.policy
        try:
            return await reload()
        except Exception as error:  # a bug or an OS error must not leave the gateway between two policies
            log.exception("policy reload failed; the policy in use keeps serving")
            return ReloadResult(f"refused: {_cut(f'{type(error).__name__}: {error}')}", old.version, old.version)

    async def _reload(self) -> ReloadResult:
        gateway = self._gateway
        old = gateway.policy
        path = gateway.settings.policy
        try:
            # Read and validated off the event loop (a large policy, regexes and CEL, must not stall calls),
            # on a daemon thread with a deadline: a read that hangs must not hold the reload lock, or the exit.
            policy = await call_with_deadline(lambda: load_policy(path, serving=old), LOAD_SECONDS, "argwatch-reload")
        except PolicyError as error:
            return ReloadResult(f"refused: {_cut(str(error))}", old.version, old.version)
        except TimeoutError:
            return ReloadResult(
                f"refused: {path}: not read and validated within {LOAD_SECONDS:g}s", old.version, old.version
            )
        return await self._serve(policy)

    async def _serve(self, policy: Policy, also_from: ValueSetProvider | None = None) -> ReloadResult:
        """Builds what `policy` needs beside what serves now, then swaps it in whole. Its sets start from the
        copies of `also_from` (a promoted shadow's), then of the provider in use, where configured the same."""
        gateway = self._gateway
        old = gateway.policy
        if policy.version == old.version:
            return ReloadResult("unchanged", old.version, old.version)
        serving = gateway.serving
        old_provider, old_clients = serving.provider, serving.record_clients
        meters = await tool_meters_in_turns(policy, gateway.metrics)  # the one part of the build that is per tool
        parts = gateway.rebuild(policy, None, meters)
        try:
            carried = set(parts.provider.carry_over(also_from)) if also_from is not None else set()
            carried |= set(parts.provider.carry_over(old_provider))  # the live copies win where both have one
            wait = NEW_SETS_WAIT_SECONDS if set(policy.value_sets) - carried else 0.0
            missing = await parts.provider.start(wait)
            # Compared off the loop: each tool's schema, deeply (10,000 tools held every call for 0.1-0.2 s).
            # The reload lock keeps `old` the policy in use until the swap.
            added, removed, changed = await asyncio.to_thread(handing_over_often(differing_tools), old, policy)
        except BaseException:
            # Nothing was swapped: the new parts go, and the scrape reads the provider in use again.
            await parts.provider.close()
            for client in parts.record_clients.values():
                await client.close()
            old_provider.publish_health()
            raise
        if missing:
            log.warning("reload: %d value set(s) not loaded yet, checked once they load: %s", len(missing), missing)
        # The swap: one reference per holder, with no await between them.
        gateway.modes.rebind(policy)
        parts.validator.shadow_changed()  # a shadow set or cleared while these parts were built: bound as it is now
        gateway.gateway_servicer.use(parts.validator)
        gateway.admin.use(policy, parts.provider, parts.record_clients)
        serving.policy, serving.provider = policy, parts.provider
        serving.record_clients, serving.validator = parts.record_clients, parts.validator
        gateway.repairs.remember_for(policy.repair.remember_seconds)
        gateway.metrics.policy_serving(policy.version)
        gateway.metrics.forget(
            tools=removed,
            sets=[name for name in old.value_sets if name not in policy.value_sets],
            sources=[name for name in old.sources if name not in policy.sources],
        )
        gateway.metrics.forget_cohorts(policy.cohorts.models, policy.cohorts.prompt_versions)
        parts.provider.publish_health()
        retiring = asyncio.get_running_loop().create_task(self._retire(old_clients))
        self._retiring[retiring] = old_clients
        retiring.add_done_callback(lambda done: self._retiring.pop(done, None))
        await asyncio.shield(old_provider.close())
        return ReloadResult(
            "reloaded",
            policy.version,
            old.version,
            tools_added=added,
            tools_removed=removed,
            tools_changed=changed,
        )

    async def _retire(self, clients: Mapping[str, RecordClient]) -> None:
        """Closes the old record clients once calls in flight on the old policy have had the grace period to
        ask their look-ups; a look-up asked by then has its source's timeout to end before it is cut (closed
        at once, a look-up asked just before the grace ran out made its call wait out its deadline)."""
        await asyncio.sleep(self._gateway.settings.grace_seconds)
        await asyncio.gather(*(client.close(grace=client.timeout_seconds) for client in clients.values()))


def _cut(text: str, limit: int = 2000) -> str:
    """A refusal as kept in the audit and GetStatus: a policy with a thousand errors is not kept whole."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def differing_tools(old: Policy, new: Policy) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The tools `new` adds, removes, and changes (its own policy, or a set it binds configured otherwise)."""
    added = tuple(name for name in new.tools if name not in old.tools)
    removed = tuple(name for name in old.tools if name not in new.tools)
    changed = tuple(name for name in new.tools if name in old.tools and _differs(old, new, name))
    return added, removed, changed


def _differs(old: Policy, new: Policy, tool: str) -> bool:
    """Whether a tool's checks changed: its own policy, or the config of a set it is bound to."""
    if old.tools[tool] != new.tools[tool]:
        return True
    # Python finds a schema's 1 equal to 1.0 and to true; JSON Schema does not (const, enum).
    before, after = old.tools[tool].schema_validator, new.tools[tool].schema_validator
    if before is not None and after is not None and before.digest != after.digest:
        return True
    sets = {binding.value_set for binding in new.tools[tool].arguments}
    return any(old.value_sets.get(name) != new.value_sets.get(name) for name in sets)
