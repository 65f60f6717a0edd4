"""Setting, clearing and promoting the shadow policy: each loaded off the event loop, swapped in whole, audited.

A shadow that does not load is refused with the reason (audited, counted as
load_failed); whatever was in use, live or shadow, keeps serving. Promoting
serves the shadow's policy through the policy reloader's own swap (audited as
a reload, "promoted from the shadow"), then clears the shadow. Promotion
writes no file: the live policy's file stays as it was, and a later reload
(SIGHUP, ReloadPolicy) serves that file again.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from argwatch.common.files import POLICY_BYTES, read_file
from argwatch.server.edge.reloading import ReloadResult
from argwatch.server.edge.shadowing import PolicyDiff, ShadowRefused, ShadowSet
from argwatch.server.modes.document import SHADOW_TARGET
from argwatch.server.modes.store import ModeChange, ModeStore
from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.model import Policy
from argwatch.server.process.daemon_call import call_with_deadline
from argwatch.server.process.reload import LOAD_SECONDS, NEW_SETS_WAIT_SECONDS, differing_tools
from argwatch.server.repair.rejections import RejectedCall, RejectionLog
from argwatch.server.shadow.judge import ShadowJudge
from argwatch.server.shadow.report import ReportSnapshot
from argwatch.server.shadow.runner import ShadowRunner
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator import Validator
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.findings import Problem
from argwatch.server.verdict.repeats import OperationRecord

if TYPE_CHECKING:
    from argwatch.server.process.app import RunningGateway


class ShadowControl:
    """The shadow of one running gateway; one change at a time."""

    def __init__(self, gateway: RunningGateway, runner: ShadowRunner, clock: Callable[[], float]) -> None:
        self._gateway = gateway
        self.runner = runner
        self._clock = clock
        self._lock = asyncio.Lock()

    async def set_file(self, path: str, actor: str, reason: str) -> ShadowSet:
        """Loads the shadow from a file on this host (serve --shadow-policy)."""
        try:
            raw = await asyncio.to_thread(read_file, path, POLICY_BYTES)
        except OSError as error:
            raise await self._refused(f"{path}: cannot read the file: {error.strerror}", actor, reason) from None
        return await self.set_text(raw, path, actor, reason, anchor=path)

    async def set_text(self, raw: bytes, name: str, actor: str, reason: str, *, anchor: str = "") -> ShadowSet:
        """Loads the shadow from its text; relative files it names are read beside `anchor` (by default, beside
        the live policy's file). Raises ShadowRefused with the reason; nothing changes then."""
        where = anchor or _beside(self._gateway.settings.policy, name)
        try:
            serving = self._gateway.policy
            policy = await call_with_deadline(
                lambda: parse_policy(raw, where, serving=serving), LOAD_SECONDS, "argwatch-shadow"
            )
        except PolicyError as error:
            raise await self._refused(_cut(str(error).replace(where, name)), actor, reason) from None
        except TimeoutError:
            why = f"{name}: not read and validated within {LOAD_SECONDS:g}s"
            raise await self._refused(why, actor, reason) from None
        return await self.set_policy(policy, name, actor, reason)

    async def set_policy(self, policy: Policy, name: str, actor: str, reason: str) -> ShadowSet:
        """Makes `policy` (loaded) the shadow: its parts built and its sets loaded first, then swapped in."""
        async with self._lock:
            judge = await self._built(policy, name)
            old = await self.runner.use(judge)
            if old is not None:
                await old.close()
            await self._audit(actor, reason, old.policy.version if old else "", policy.version, "set")
            return ShadowSet(policy.version, old.policy.version if old else "", judge.unavailable_sets())

    async def clear(self, actor: str, reason: str) -> str:
        """Stops the shadow; returns the version it had ("" when there was none: still audited)."""
        async with self._lock:
            old = await self.runner.use(None)
            if old is not None:
                await old.close()
            version = old.policy.version if old is not None else ""
            await self._audit(actor, reason, version, "", "cleared" if old is not None else "cleared (none was set)")
            return version

    def report(self) -> ReportSnapshot | None:
        """The shadow's report now (None: no shadow)."""
        return self.runner.report()

    def diff(self) -> PolicyDiff | None:
        """What promoting would change (None: no shadow)."""
        judge = self.runner.judge
        if judge is None:
            return None
        live, shadow = self._gateway.policy, judge.policy
        added, removed, changed = differing_tools(live, shadow)
        return PolicyDiff(live.version, shadow.version, added, removed, changed)

    async def promote(self, actor: str, reason: str, expected_version: str) -> ReloadResult:
        """Serves the shadow's policy (when it is still `expected_version`, the one previewed), then clears
        the shadow. Raises ShadowRefused when there is none, or another one."""
        async with self._lock:
            judge = self.runner.judge
            if judge is None:
                raise ShadowRefused("no shadow policy is set")
            if expected_version and judge.policy.version != expected_version:
                raise ShadowRefused(
                    f"the shadow is now {judge.policy.version}, not {expected_version} as previewed: preview again"
                )
            reloader = self._gateway.reloader
            assert reloader is not None
            result = await reloader.promote(judge.policy, actor, reason, judge.provider)
            if result.outcome.startswith("refused"):
                return result
            old = await self.runner.use(None)
            if old is not None:
                await old.close()
            await self._audit(actor, reason, judge.policy.version, "", "promoted (now the live policy)")
            return result

    async def _built(self, policy: Policy, name: str) -> ShadowJudge:
        """The shadow's own parts (shadow/judge.py), its sets loaded from the live copies where configured the
        same, and the rest waited for briefly (as a reload waits)."""
        from argwatch.server.process.app import limits_of, make_fetcher, record_clients_for  # app imports this

        gateway = self._gateway
        metrics = GatewayMetrics(CollectorRegistry())  # the shadow's own: nobody scrapes it
        cache = SharedCache(None, metrics)  # memory, this process: the shadow shares nothing with the fleet
        fetchers = {name: make_fetcher(config, limits_of(policy, name)) for name, config in policy.sources.items()}
        provider = ValueSetProvider(policy, fetchers, cache, metrics, clock=self._clock)
        record_clients = record_clients_for(policy, metrics)
        modes = ModeStore(policy, clock=self._clock)  # memory only; takes the live document (judge.py)
        validator = Validator(
            policy,
            provider,
            modes,
            metrics,
            SampledValueLog(0.0, 1),  # samples nothing
            _NoRejections(),
            record_clients,
            _NoOffenders(),
            counted=False,
        )
        judge = ShadowJudge(policy, name, validator, provider, record_clients, modes)
        try:
            carried = provider.carry_over(gateway.provider)
            await provider.start(NEW_SETS_WAIT_SECONDS if set(policy.value_sets) - set(carried) else 0.0)
        except BaseException:
            await judge.close()
            raise
        judge.follow_overrides(gateway.modes)
        return judge

    async def _refused(self, why: str, actor: str, reason: str) -> ShadowRefused:
        self.runner.load_failed()
        judge = self.runner.judge
        await self._audit(actor, reason, judge.policy.version if judge else "", "", f"refused: {why}")
        return ShadowRefused(why)

    async def _audit(self, actor: str, reason: str, old: str, new: str, outcome: str) -> None:
        gateway = self._gateway
        await gateway.control.audit(
            ModeChange(
                at=self._clock(),
                actor=actor,
                target=SHADOW_TARGET,
                old=old,
                new=new,
                reason=f"{reason} (replica {gateway.settings.replica_id})",
                expires_at=None,
                outcome=outcome,
            )
        )


class _NoRejections(RejectionLog):
    """The shadow's: a refusal it would make is remembered nowhere (Repair is the live policy's)."""

    def __init__(self) -> None:
        pass

    async def record(
        self,
        *,
        call_id: str,
        tool: str,
        scope: str,
        problems: tuple[Problem, ...],
        call_fingerprint: str,
        repeat_of: OperationRecord | None = None,
        in_conversation: bool = True,
    ) -> RejectedCall:
        return RejectedCall(call_id, tool, scope, (), 1, "", repeat_of)

    async def find(self, scope: str, call_id: str) -> RejectedCall | None:
        return None


class _NoOffenders(OffenderTable):
    """The shadow's: its offending values are not the live table's, and are kept nowhere."""

    def add(self, tool: str, argument: str, value: str, shape: str) -> None:
        return None


def _beside(live: str, name: str) -> str:
    """Where a shadow sent as text is anchored: beside the live policy's file, under its own file name."""
    return os.path.join(os.path.dirname(os.path.abspath(live)), os.path.basename(name))


def _cut(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"
