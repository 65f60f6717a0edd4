"""Hands each decided call to the shadow policy, off the caller's path, and tallies how its verdict differs.

The live Validator calls `offer` after its verdict is made (the verdict is
already the caller's: nothing here can change it or delay it). The shadow's
judgment runs as a task of its own, since a record look-up may await; at most
`max_in_flight` run at once, and a call past that bound is counted as busy
and not judged, never queued. A shadow that raises on a call is counted and
logged at most once a minute; the live verdict never hears of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial

from prometheus_client import Counter

from argwatch.common.tasks import cancel_and_wait
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.model import Policy
from argwatch.server.shadow.compare import difference, example, live_before_repeats
from argwatch.server.shadow.judge import ShadowJudge
from argwatch.server.shadow.report import ReportSnapshot, ShadowReport
from argwatch.server.telemetry.metrics import UNKNOWN_LABEL, GatewayMetrics
from argwatch.server.validator import Validator
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall

log = logging.getLogger("argwatch.shadow")

MAX_IN_FLIGHT = 64  # shadow judgments awaiting at once (record look-ups); past it a call is skipped as busy
# A shadow's record look-ups may take this long: no caller waits for them, but each holds a place in flight.
DEADLINE_SECONDS = 2.0
LOG_EVERY_SECONDS = 60.0
FAILURE_REASONS = ("load_failed", "raised", "busy")


class ShadowRunner:
    """The shadow in use (if any), its report, and its judgments in flight."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        live_modes: ModeStore,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._live_modes = live_modes
        self._max_in_flight = max_in_flight
        self._clock = clock
        self._monotonic = monotonic
        self._judge: ShadowJudge | None = None
        self._report: ShadowReport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._validator: Callable[[], Validator] | None = None
        self._next_log = 0.0
        self._unlogged = 0
        self._calls = metrics.shadow_calls
        self._failures = {reason: metrics.shadow_failures.labels(reason) for reason in FAILURE_REASONS}
        self._differences: dict[tuple[str, str], Counter] = {}

    # ---- what the live Validator sees (validator.ShadowTap)

    @property
    def active(self) -> bool:
        return self._judge is not None

    def offer(self, call: ToolCall, verdict: Verdict, live: Policy) -> None:
        judge, report = self._judge, self._report
        if judge is None or report is None:
            return  # cleared between a reload's build and its swap: the next rebind drops the wrapper
        if len(self._tasks) >= self._max_in_flight:
            report.busy += 1
            self._failures["busy"].inc()
            return
        task = asyncio.get_running_loop().create_task(self._judged(judge, report, call, verdict, live))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- what the process and the Admin API see

    @property
    def judge(self) -> ShadowJudge | None:
        return self._judge

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def drained(self) -> None:
        """Returns once every judgment in flight now has ended (for a benchmark's batch, and tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def calls_judged(self) -> int:
        """Calls the shadow in use has judged (0: none in use)."""
        return self._report.calls if self._report is not None else 0

    def watch(self, validator: Callable[[], Validator]) -> None:
        """`validator` gives the live Validator now (a reload replaces it): rebound at each set or clear."""
        self._validator = validator

    def report(self) -> ReportSnapshot | None:
        judge, report = self._judge, self._report
        if judge is None or report is None:
            return None
        return report.snapshot(judge.unavailable_sets())

    async def use(self, judge: ShadowJudge | None) -> ShadowJudge | None:
        """Makes `judge` the shadow (None: none); a new one starts a new report. Judgments in flight on the
        one before are cancelled (they decide nothing), and it is returned, for the caller to close."""
        old = self._judge
        self._judge = judge
        self._report = ShadowReport(judge.policy.version, judge.name, self._clock()) if judge is not None else None
        self._metrics.shadow_policy.clear()
        self._differences.clear()
        self._metrics.shadow_differences.clear()  # a new shadow's differences are not the last one's
        if judge is not None:
            self._metrics.shadow_policy.labels(judge.policy.version).set(1)
        if self._validator is not None:
            self._validator().shadow_changed()
        await cancel_and_wait(list(self._tasks))
        return old

    def load_failed(self) -> None:
        self._failures["load_failed"].inc()

    async def close(self) -> None:
        old = await self.use(None)
        if old is not None:
            await old.close()

    # ---- judging

    async def _judged(
        self, judge: ShadowJudge, report: ShadowReport, call: ToolCall, live: Verdict, live_policy: Policy
    ) -> None:
        try:
            judge.follow_overrides(self._live_modes)
            shadow = await judge.validator.validate(call, DEADLINE_SECONDS)
        except Exception as error:  # a bug in judging one call must not stop the shadow, nor reach the caller
            report.raised += 1
            self._failures["raised"].inc()
            self._log_raised(call, error)
            return
        report.calls += 1
        self._calls.inc()
        live_side = live_before_repeats(live)
        kind = difference(live_side[0], live_side[1], shadow)
        if kind is None:
            return
        tool = call.tool
        label = tool if tool in judge.policy.tools or tool in live_policy.tools else UNKNOWN_LABEL
        redact = judge.policy.sampling.redact | live_policy.sampling.redact
        report.differed(label, kind, partial(example, self._clock(), call.call_id, tool, live_side, shadow, redact))
        counter = self._differences.get((label, kind.value))
        if counter is None:
            counter = self._differences[label, kind.value] = self._metrics.shadow_differences.labels(label, kind.value)
        counter.inc()

    def _log_raised(self, call: ToolCall, error: Exception) -> None:
        """At most one line a minute, saying how many were not logged: a shadow raising on every call must not
        flood the log."""
        now = self._monotonic()
        if now < self._next_log:
            self._unlogged += 1
            return
        more = f" (and {self._unlogged} more since the last line)" if self._unlogged else ""
        log.error(
            "the shadow policy raised judging a call of %r%s; the live verdict stands",
            call.tool[:80],
            more,
            exc_info=error,
        )
        self._next_log, self._unlogged = now + LOG_EVERY_SECONDS, 0
