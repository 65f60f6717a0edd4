"""The Admin servicer: the gateway's state for operators, scripts and the TUI."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import grpc

from argwatch.server.edge import wire
from argwatch.server.edge.admin_auth import TokenBook
from argwatch.server.edge.preview_wire import preview_to_wire
from argwatch.server.edge.reloading import Reloader
from argwatch.server.edge.request_limits import MAX_CHECK, MAX_REASON, MAX_TOOL
from argwatch.server.edge.shadow_wire import promoted_to_wire, report_to_wire
from argwatch.server.edge.shadowing import ShadowAdmin, ShadowRefused
from argwatch.server.edge.source_status import source_statuses
from argwatch.server.edge.status_pages import KeptPages, split_status
from argwatch.server.edge.status_selection import (
    EVERY_TOOL,
    Selection,
    ToolNeeds,
    by_attention,
    cut,
    matching,
    named_first,
    read_selection,
)
from argwatch.server.modes.control import LocalModes, ModeControl
from argwatch.server.modes.document import GLOBAL, POLICY_TARGET, SHADOW_TARGET, ModeDocument, OverrideRequest, Target
from argwatch.server.modes.preview import preview
from argwatch.server.modes.store import ModeChange, ModeRefused, ModeStore
from argwatch.server.policy.check_ids import (
    ARG,
    FAILURE_PREFIXES,
    RECORD,
    RECORD_KIND,
    REPEAT_CHECK,
    RULE,
    SCHEMA_CHECK,
    SOURCE,
    VALUE_SET,
    record_failure,
    set_failure,
)
from argwatch.server.policy.coverage import (
    PolicyCoverage,
    PolicySurface,
    SampledValues,
    SampleKey,
    ToolCoverage,
    coverage_with,
    policy_surface,
)
from argwatch.server.policy.model import Failure, Mode, Policy
from argwatch.server.records.lookup_client import RecordClient
from argwatch.server.telemetry.call_signatures import SignatureKey
from argwatch.server.telemetry.count_windows import CountWindows
from argwatch.server.telemetry.counts import CountKey, ToolCounts, fold
from argwatch.server.telemetry.events import MAX_EVENTS, Event, EventLog
from argwatch.server.telemetry.metrics import UNKNOWN_LABEL, GatewayMetrics
from argwatch.server.telemetry.offenders import MAX_VALUES, OTHER, OffenderTable
from argwatch.server.telemetry.rate_steps import RateSteps
from argwatch.server.telemetry.shape_report import rows_from_counts
from argwatch.server.telemetry.status_windows import StatusWindows, ToolWindows, WindowFigures
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.valuesets.set_state import SetStatus
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2

MIN_WATCH_INTERVAL = 0.2
# What one Admin answer lists at most, so that each stays under gRPC's 4 MiB whatever the policy's size: the
# audit's entries (each with a reason of up to 1,024 characters), a reload's tools per list, shape rows.
MAX_LISTED_CHANGES = 1000
PREVIEW_WINDOWS = (60, 900)  # what is happening now, and the quarter hour around it
MAX_LISTED_TOOLS = 1000
MAX_SHAPE_ROWS = 5000
ROWS_PER_SLICE = 50  # argument rows built between yields to the event loop
TOOLS_MATCHED_PER_SLICE = 1000  # tools matched against a selection's `contains` between yields
# The status feed's share of the event loop, at most: a snapshot that took 100 ms to build is
# shared for at least 2 s, whatever interval watchers ask for, times the number of selections watched
# (shared_age; but never longer than MAX_SHARED_SECONDS). Its taken_at says how old it is.
STATUS_LOOP_SHARE = 0.05
MAX_SHARED_SECONDS = 10.0
KEPT_SELECTIONS = 16  # the selections whose last snapshot is kept for the watchers that share it
# A selection asked for within this many seconds is watched: its build counts in the loop's budget.
WATCHED_SECONDS = 2 * MAX_SHARED_SECONDS


class _SliceClock:
    """The time a sliced build spends in its own slices, leaving out what other tasks do between them."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._since = time.perf_counter()

    async def pause(self) -> None:
        """Lets other tasks run (Validate must not wait for a whole snapshot)."""
        self.spent += time.perf_counter() - self._since
        await asyncio.sleep(0)
        self._since = time.perf_counter()

    def stop(self) -> float:
        self.spent += time.perf_counter() - self._since
        return self.spent


class AdminServicer(admin_pb2_grpc.AdminServicer):
    """GetStatus: per tool counts and mode, per value set its version and freshness."""

    def __init__(
        self,
        *,
        replica_id: str,
        policy_version: str,
        modes: ModeStore,
        control: ModeControl | None = None,
        metrics: GatewayMetrics,
        provider: ValueSetProvider,
        policy: Policy,
        windows: CountWindows[CountKey],
        offenders: OffenderTable | None = None,
        tokens: TokenBook | None = None,
        clock: Callable[[], float] = time.time,
        events: EventLog | None = None,
        record_clients: Mapping[str, RecordClient] | None = None,
        signatures: CountWindows[SignatureKey] | None = None,
    ) -> None:
        """`signatures`: the calls by refusal signature over time, what PreviewChange reads."""
        self._replica_id = replica_id
        self._policy_version = policy_version
        self._modes = modes
        self._control: ModeControl = control if control is not None else LocalModes(modes)
        self._metrics = metrics
        self._provider = provider
        self._record_clients: Mapping[str, RecordClient] = record_clients or {}
        self._policy = policy
        self._windows = windows
        self._signatures = signatures
        self._status_windows = StatusWindows(policy, windows)
        self._tokens = tokens
        self._offenders = offenders if offenders is not None else OffenderTable()
        self._clock = clock
        # The last snapshots (their pages, and when), per selection: watchers asking for the same share one.
        self._last_status: OrderedDict[Selection, tuple[float, list[admin_pb2.GetStatusResponse]]]
        self._last_status = OrderedDict()
        self._kept_pages = KeptPages()  # GetStatus's, so that a client reads one snapshot page by page
        # Per selection kept, its last snapshot's build, its own slices only (other tasks' turns left out).
        self._build_seconds: dict[Selection, float] = {}
        self._served_at: dict[Selection, float] = {}  # when a watcher last asked for each
        self._status_lock = asyncio.Lock()
        self._closing = asyncio.Event()
        self._reloader: Reloader | None = None
        self._shadow: ShadowAdmin | None = None
        self.events = events if events is not None else EventLog(clock)
        self._rate_steps = RateSteps(self.events)
        self._generation = 0  # bumped by each reload (use)
        # GetCoverage's walk of the policy in use: done, or under way (the calls meanwhile await the same one).
        self._coverage_surface: tuple[Policy, asyncio.Task[PolicySurface]] | None = None
        self._tool_needs = (policy, ToolNeeds(policy))  # for the attention order, made again for a new policy

    def attach_reloader(self, reloader: Reloader) -> None:
        self._reloader = reloader

    def attach_shadow(self, shadow: ShadowAdmin) -> None:
        self._shadow = shadow

    def use(
        self, policy: Policy, provider: ValueSetProvider, record_clients: Mapping[str, RecordClient] | None = None
    ) -> None:
        """A reloaded policy, its provider and record clients: the next status is built from them whole."""
        self._policy, self._provider, self._policy_version = policy, provider, policy.version
        self._record_clients = record_clients or {}
        self._status_windows = StatusWindows(policy, self._windows, self._status_windows.index)
        self._last_status.clear()
        self._build_seconds.clear()
        self._generation += 1  # a snapshot being built from the policy before is not kept as the latest

    async def GetStatus(
        self,
        request: admin_pb2.GetStatusRequest,
        context: grpc.aio.ServicerContext[admin_pb2.GetStatusRequest, admin_pb2.GetStatusResponse],
    ) -> admin_pb2.GetStatusResponse:
        selection = await _selection_of(request.selection, context)
        if request.page_token:
            page = self._kept_pages.page(request.page_token)
            if page is None:
                await context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    "no such page: its snapshot is no longer kept (the last 8, for a minute); "
                    "ask again without a token",
                )
            assert page is not None  # abort raises
            return page
        return self._kept_pages.keep(await split_status(await self._status(selection)))[0]

    async def WatchStatus(
        self,
        request: admin_pb2.WatchStatusRequest,
        context: grpc.aio.ServicerContext[admin_pb2.WatchStatusRequest, admin_pb2.GetStatusResponse],
    ) -> AsyncIterator[admin_pb2.GetStatusResponse]:
        interval = request.interval_seconds or 1.0
        if interval < MIN_WATCH_INTERVAL:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"interval_seconds {interval:g} is below the least allowed, {MIN_WATCH_INTERVAL:g}",
            )
        selection = await _selection_of(request.selection, context)
        while not self._closing.is_set():
            started = time.monotonic()
            for page in await self._shared_status(selection, max_age=min(interval / 2, 0.5)):
                yield page  # a snapshot larger than one message: its pages, one after another
            # A steady cadence: the time spent building the snapshot comes off the wait.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(interval - (time.monotonic() - started), 0.0)):
                    await self._closing.wait()

    def end_watches(self) -> None:
        """Ends every WatchStatus stream (at shutdown: watchers are not in-flight work to drain)."""
        self._closing.set()

    async def _shared_status(self, selection: Selection, max_age: float) -> list[admin_pb2.GetStatusResponse]:
        """A snapshot no older than `max_age`, shared by every watcher of the same selection: at 200 tools x 5
        arguments one costs tens of milliseconds of the event loop (bench/status_tui.py), so ten TUIs must not
        cost ten times that. The watched selections share one budget of the loop (STATUS_LOOP_SHARE): watchers
        of sixteen different selections must not cost sixteen times it either."""
        async with self._status_lock:  # watchers arriving together wait for one build
            now = time.monotonic()
            self._served_at[selection] = now
            max_age = max(max_age, shared_age(selection, self._build_seconds, self._served_at, now))
            last = self._last_status.get(selection)
            if last is None or now - last[0] > max_age:
                generation = self._generation
                snapshot, seconds = await self._built_status(selection)
                built = await split_status(snapshot)
                if generation != self._generation:
                    return built  # built across a reload: sent to this watcher, never shared
                last = self._last_status[selection] = (time.monotonic(), built)
                self._build_seconds[selection] = seconds
                self._last_status.move_to_end(selection)
                while len(self._last_status) > KEPT_SELECTIONS:
                    dropped, _ = self._last_status.popitem(last=False)
                    self._build_seconds.pop(dropped, None)
            for key in [key for key in self._served_at if key not in self._last_status]:
                del self._served_at[key]  # bounded as the snapshots kept are
            return last[1]

    async def _status(self, selection: Selection = EVERY_TOOL) -> admin_pb2.GetStatusResponse:
        return (await self._built_status(selection))[0]

    async def _built_status(self, selection: Selection) -> tuple[admin_pb2.GetStatusResponse, float]:
        """The snapshot, and the time its own slices took (other tasks' turns between them left out)."""
        # One policy and one provider for the whole snapshot: it pauses to let calls in, and a reload may
        # swap both meanwhile (a tool it removed would not be found in the new one).
        policy, provider, policy_version = self._policy, self._provider, self._policy_version
        status_windows = self._status_windows
        record_clients = self._record_clients
        can_run = _checks_that_can_run(provider, record_clients)
        every_mode = self._modes.tool_modes()
        clock = _SliceClock()
        counts_now = status_windows.live()
        listed = [*every_mode, UNKNOWN_LABEL] if status_windows.has_tool(UNKNOWN_LABEL) else list(every_mode)
        matched: list[str] = []
        for start in range(0, len(listed), TOOLS_MATCHED_PER_SLICE):  # the first after a reload reads every row
            await clock.pause()
            part = listed[start : start + TOOLS_MATCHED_PER_SLICE]
            matched += matching(part, selection.contains, status_windows.searchable)
        if selection.attention:
            await clock.pause()
            needs = self._tool_needs
            if needs[0] is not policy:
                needs = self._tool_needs = (policy, ToolNeeds(policy))
            ranks = status_windows.attention(counts_now, policy.attention.min_checks)
            await clock.pause()
            matched = by_attention(
                matched,
                ranks,
                down=needs[1].cannot_run_now(can_run),
                stale=needs[1].with_stale_sets(state.config.name for state in provider.statuses() if state.stale),
                out_of_set_rate=policy.attention.out_of_set_rate,
                min_checks=policy.attention.min_checks,
            )
        await clock.pause()
        chosen = cut(named_first(matched, selection.contains), selection)
        tool_modes = {tool: every_mode[tool] for tool in chosen if tool in every_mode}
        figures = await status_windows.figures_in_slices(clock.pause, chosen if selection.narrows else None, counts_now)
        await clock.pause()
        totals = figures.totals
        override = self._modes.global_override
        attention = policy.attention
        response = admin_pb2.GetStatusResponse(
            replica_id=self._replica_id,
            policy_version=policy_version,
            attention_out_of_set_rate=attention.out_of_set_rate,
            attention_min_checks=attention.min_checks,
            attention_override_expiring_seconds=attention.override_expiring_seconds,
            global_mode=wire.MODES[override] if override else gateway_pb2.MODE_UNSPECIFIED,
            taken_at=wire.timestamp(self._clock()),
            tools_total=len(listed),
            tools_matched=len(matched),
        )
        for count, tool in enumerate(chosen, start=1):  # in the selection's order, "_unknown" where it ranks
            if count % ROWS_PER_SLICE == 0:
                await clock.pause()
            mode = tool_modes.get(tool)
            if mode is None:  # "_unknown": no mode, no checks, its counts only
                unknown = _tool_status(tool, gateway_pb2.MODE_UNSPECIFIED, totals.get(tool) or ToolCounts())
                _add_tool_windows(unknown, figures.tool(tool))
                response.tools.append(unknown)
                continue
            tool_status = _tool_status(tool, wire.MODES[mode], totals.get(tool) or ToolCounts())
            tool_status.checks.extend(
                _check_policies(policy, tool, self._modes.document, can_run, self._modes.failure_overrides())
            )
            tool_policy = policy.tools.get(tool)
            tool_status.side_effect = tool_policy is not None and tool_policy.side_effect is not None
            if tool_policy is not None:
                tool_status.policy_mode = wire.MODES[tool_policy.mode]
            source, tool_override = self._modes.source_of(tool)
            tool_status.mode_source = source
            if tool_override is not None and tool_override.expires_at is not None:
                tool_status.mode_expires_at.CopyFrom(wire.timestamp(tool_override.expires_at))
            tool_figures = figures.tool(tool)
            _add_tool_windows(tool_status, tool_figures)
            response.tools.append(tool_status)
        for count, row in enumerate(figures.arguments, start=1):
            if count % ROWS_PER_SLICE == 0:
                # Let calls in: a snapshot of 1000 rows is a long pass, and Validate must not wait for all of it.
                await clock.pause()
            argument = response.arguments.add(
                tool=row.tool,
                argument=row.argument,
                value_set=row.value_set,
                checks_per_minute=row.checks_per_minute,
                out_of_set_per_minute=row.out_of_set_per_minute,
            )
            argument.windows.extend(_window_to_wire(window) for window in row.windows)
        set_states = provider.statuses()
        for state in set_states:
            response.value_sets.append(_set_status(state))
        response.sources.extend(source_statuses(policy, set_states, record_clients))
        for target, kept in sorted(self._modes.document.overrides.items()):
            if target.tool == GLOBAL and target.check:  # a failure override (kept whatever this policy has)
                failure = response.failure_overrides.add(
                    target=target.check,
                    failure="open" if kept.mode is Mode.OBSERVE else "closed",
                    actor=kept.actor,
                    reason=kept.reason,
                    set_at=wire.timestamp(kept.set_at),
                )
                if kept.expires_at is not None:
                    failure.expires_at.CopyFrom(wire.timestamp(kept.expires_at))
        for tool, foreign in sorted(self._modes.foreign_overrides().items()):
            entry = response.foreign_overrides.add(
                tool=tool,
                mode=wire.MODES[foreign.mode],
                actor=foreign.actor,
                reason=foreign.reason,
                set_at=wire.timestamp(foreign.set_at),
            )
            if foreign.expires_at is not None:
                entry.expires_at.CopyFrom(wire.timestamp(foreign.expires_at))
        if self._reloader is not None:
            loaded = self._reloader.state
            response.policy_loaded_at.CopyFrom(wire.timestamp(loaded.loaded_at))
            response.policy_promoted_from = loaded.promoted_from
            if loaded.refused:
                response.policy_reload_error = loaded.refused
                response.policy_reload_error_at.CopyFrom(wire.timestamp(loaded.refused_at))
        shadow = self._shadow.report() if self._shadow is not None else None
        if shadow is not None:
            response.shadow_version = shadow.version
            response.shadow_differences = sum(row.count for row in shadow.rows)
        connected, error = self._control.status()
        response.mode_store = self._control.kind
        response.mode_store_connected, response.mode_store_error = connected, error
        now = self._clock()
        fleet = self._control.fleet()
        # A selection's replicas name the tools it carries, and any tool the reporting replicas disagree on.
        shown_modes = _modes_to_show(fleet, chosen) if selection.narrows else None
        for report in fleet:
            replica = response.replicas.add(
                replica_id=str(report.get("replica_id", "")),
                policy_version=str(report.get("policy_version", "")),
                seconds_since_report=max(now - float(report.get("seen_at", now)), 0.0),
                reporting=bool(report.get("reporting")),
                global_mode=str(report.get("global_mode", "")),
            )
            replica.modes.update(
                {
                    str(k): str(v)
                    for k, v in dict(report.get("modes", {})).items()
                    if shown_modes is None or str(k) in shown_modes
                }
            )
            replica.value_set_versions.update({str(k): int(v) for k, v in dict(report.get("value_sets", {})).items()})
            replica.sources_connected.update({str(k): bool(v) for k, v in dict(report.get("sources", {})).items()})
        return response, clock.stop()

    async def SetMode(
        self,
        request: admin_pb2.SetModeRequest,
        context: grpc.aio.ServicerContext[admin_pb2.SetModeRequest, admin_pb2.SetModeResponse],
    ) -> admin_pb2.SetModeResponse:
        mode = await _requested_mode(context, request)
        try:
            change = await self._control.set_mode(
                request.tool,
                mode,
                actor=self._actor(context),
                reason=request.reason,
                expires_in=float(request.expires_in_seconds) or None,
                check=request.check,
            )
        except ModeRefused as refused:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(refused))
            raise  # abort raises; this is for the type checker
        return admin_pb2.SetModeResponse(
            change=_change_to_wire(change), durability_warning=self._control.durability_warning(change)
        )

    async def RefreshValueSet(
        self,
        request: admin_pb2.RefreshValueSetRequest,
        context: grpc.aio.ServicerContext[admin_pb2.RefreshValueSetRequest, admin_pb2.RefreshValueSetResponse],
    ) -> admin_pb2.RefreshValueSetResponse:
        provider = self._provider  # the same one throughout, even if a reload swaps it meanwhile
        if request.name not in self._policy.value_sets:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"the policy has no value set {request.name!r}")
        result = await provider.refresh(request.name)
        (state,) = [s for s in provider.statuses() if s.config.name == request.name]
        return admin_pb2.RefreshValueSetResponse(
            value_set=_set_status(state),
            outcome=int(result.outcome),  # type: ignore[arg-type]
            detail=result.detail,
        )

    async def ReloadPolicy(
        self,
        request: admin_pb2.ReloadPolicyRequest,
        context: grpc.aio.ServicerContext[admin_pb2.ReloadPolicyRequest, admin_pb2.ReloadPolicyResponse],
    ) -> admin_pb2.ReloadPolicyResponse:
        await _within_limits(context, ("reason", request.reason, MAX_REASON))
        if not request.reason.strip():
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "a reason is required (a change ticket, what changed)"
            )
        if self._reloader is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this gateway was built without a policy reloader")
            raise AssertionError  # abort raises; this is for the type checker
        result = await self._reloader.reload(self._actor(context), request.reason)
        lists = (result.tools_added, result.tools_removed, result.tools_changed)
        return admin_pb2.ReloadPolicyResponse(
            outcome=result.outcome,
            policy_version=result.policy_version,
            previous_version=result.previous_version,
            tools_added=result.tools_added[:MAX_LISTED_TOOLS],
            tools_removed=result.tools_removed[:MAX_LISTED_TOOLS],
            tools_changed=result.tools_changed[:MAX_LISTED_TOOLS],
            tools_left_off=sum(max(0, len(names) - MAX_LISTED_TOOLS) for names in lists),
        )

    async def SetShadowPolicy(
        self,
        request: admin_pb2.SetShadowPolicyRequest,
        context: grpc.aio.ServicerContext[admin_pb2.SetShadowPolicyRequest, admin_pb2.SetShadowPolicyResponse],
    ) -> admin_pb2.SetShadowPolicyResponse:
        shadow = await self._shadow_control(context, request.reason, ("name", request.name, MAX_TOOL))
        try:
            done = await shadow.set_text(
                request.policy_yaml, request.name or "shadow.yaml", self._actor(context), request.reason
            )
        except ShadowRefused as refused:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"shadow policy refused: {refused}")
            raise  # abort raises; this is for the type checker
        return admin_pb2.SetShadowPolicyResponse(
            shadow_version=done.version, previous_version=done.previous_version, unavailable_sets=done.unavailable_sets
        )

    async def ClearShadowPolicy(
        self,
        request: admin_pb2.ClearShadowPolicyRequest,
        context: grpc.aio.ServicerContext[admin_pb2.ClearShadowPolicyRequest, admin_pb2.ClearShadowPolicyResponse],
    ) -> admin_pb2.ClearShadowPolicyResponse:
        shadow = await self._shadow_control(context, request.reason)
        return admin_pb2.ClearShadowPolicyResponse(
            shadow_version=await shadow.clear(self._actor(context), request.reason)
        )

    async def GetShadowReport(
        self,
        request: admin_pb2.GetShadowReportRequest,
        context: grpc.aio.ServicerContext[admin_pb2.GetShadowReportRequest, admin_pb2.GetShadowReportResponse],
    ) -> admin_pb2.GetShadowReportResponse:
        if self._shadow is None:
            return admin_pb2.GetShadowReportResponse(loaded=False)
        return report_to_wire(self._shadow.report(), self._shadow.diff())

    async def PromoteShadow(
        self,
        request: admin_pb2.PromoteShadowRequest,
        context: grpc.aio.ServicerContext[admin_pb2.PromoteShadowRequest, admin_pb2.PromoteShadowResponse],
    ) -> admin_pb2.PromoteShadowResponse:
        shadow = await self._shadow_control(context, request.reason, ("shadow_version", request.shadow_version, 64))
        try:
            result = await shadow.promote(self._actor(context), request.reason, request.shadow_version)
        except ShadowRefused as refused:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(refused))
            raise  # abort raises; this is for the type checker
        return promoted_to_wire(result)

    async def _shadow_control(
        self, context: grpc.aio.ServicerContext[Any, Any], reason: str, *fields: tuple[str, str, int]
    ) -> ShadowAdmin:
        """The shadow's control, once the request's reason is there and its fields within limits."""
        await _within_limits(context, ("reason", reason, MAX_REASON), *fields)
        if not reason.strip():
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "a reason is required (a change ticket, what is tried)"
            )
        if self._shadow is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this gateway was built without a shadow control")
            raise AssertionError  # abort raises; this is for the type checker
        return self._shadow

    async def ListEvents(
        self,
        request: admin_pb2.ListEventsRequest,
        context: grpc.aio.ServicerContext[admin_pb2.ListEventsRequest, admin_pb2.ListEventsResponse],
    ) -> admin_pb2.ListEventsResponse:
        limit = min(request.limit or 100, MAX_EVENTS)
        recorded = self.events.newest(limit)
        audited = [
            Event(change.at, "policy" if change.target in (POLICY_TARGET, SHADOW_TARGET) else "mode",
                  change.target or "<global>",
                  f"{change.old or '-'} -> {change.new or '-'} by {change.actor} ({change.reason}): {change.outcome}")
            for change in self._modes.changes(limit)
        ]  # fmt: skip
        merged = sorted([*recorded, *audited], key=lambda event: -event.at)[:limit]
        return admin_pb2.ListEventsResponse(
            events=[
                admin_pb2.Event(at=wire.timestamp(e.at), kind=e.kind, subject=e.subject, detail=e.detail)
                for e in merged
            ]
        )

    def look_for_rate_steps(self) -> None:
        """Records steps in an argument's out-of-set rate (called every minute)."""
        self._rate_steps.look(self._status_windows.figures().arguments, self._policy.attention)

    async def ListSamples(
        self,
        request: admin_pb2.ListSamplesRequest,
        context: grpc.aio.ServicerContext[admin_pb2.ListSamplesRequest, admin_pb2.ListSamplesResponse],
    ) -> admin_pb2.ListSamplesResponse:
        found = self._offenders.offenders(request.tool, request.argument, min(request.limit or 20, MAX_VALUES))
        response = admin_pb2.ListSamplesResponse(
            total=found.total,
            top_two_share=found.top_two_share,
            clustered=found.clustered,
            out_of_set=found.out_of_set,
            invented=found.invented,
        )
        for row in found.rows:
            response.values.add(
                value=row.value, count=row.count, shape=row.shape, last_seen=wire.timestamp(row.last_seen)
            )
        return response

    async def GetCohorts(
        self,
        request: admin_pb2.GetCohortsRequest,
        context: grpc.aio.ServicerContext[admin_pb2.GetCohortsRequest, admin_pb2.GetCohortsResponse],
    ) -> admin_pb2.GetCohortsResponse:
        response = admin_pb2.GetCohortsResponse()
        for cohort in self._status_windows.cohorts(request.tool, request.argument):
            entry = response.cohorts.add(model=cohort.model, prompt_version=cohort.prompt_version)
            entry.windows.extend(_window_to_wire(window) for window in cohort.windows)
        return response

    async def GetCoverage(
        self,
        request: admin_pb2.GetCoverageRequest,
        context: grpc.aio.ServicerContext[admin_pb2.GetCoverageRequest, admin_pb2.GetCoverageResponse],
    ) -> admin_pb2.GetCoverageResponse:
        policy = self._policy  # one policy throughout, whatever a reload does meanwhile
        # Shielded: a caller that leaves (its deadline passed) does not cancel the walk the others await.
        surface = await asyncio.shield(self._coverage_walk(policy))
        found = coverage_with(surface, offender_samples(self._offenders, policy))
        return coverage_to_wire(found, OFFENDER_SAMPLES)

    def _coverage_walk(self, policy: Policy) -> asyncio.Task[PolicySurface]:
        """The walk of the policy's schemas, one per policy: the calls that come while it runs await that one.
        In a thread, so the calls this loop judges meanwhile are not held up for all of it: each tool's walk
        is bounded (schema_surface.MAX_NODES), a policy's is not. A walk that failed is tried again."""
        cached = self._coverage_surface
        if cached is not None and cached[0] is policy and not _failed(cached[1]):
            return cached[1]
        walk = asyncio.get_running_loop().create_task(asyncio.to_thread(policy_surface, policy))
        self._coverage_surface = (policy, walk)
        return walk

    async def PreviewChange(
        self,
        request: admin_pb2.PreviewChangeRequest,
        context: grpc.aio.ServicerContext[admin_pb2.PreviewChangeRequest, admin_pb2.PreviewChangeResponse],
    ) -> admin_pb2.PreviewChangeResponse:
        change = request.change
        mode = await _requested_mode(context, change)
        if self._signatures is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this gateway keeps no calls by signature")
            raise AssertionError  # abort raises; this is for the type checker
        asked = OverrideRequest(
            Target(change.tool, change.check),
            mode,
            self._actor(context),
            change.reason or "preview",  # nothing is audited: a preview needs no reason
            float(change.expires_in_seconds) or None,
        )
        live = self._signatures.live()
        keys = self._signatures.keys
        windows = []
        for seconds in PREVIEW_WINDOWS:
            values, covered = self._signatures.window_from(live, seconds)
            windows.append((seconds, covered, {key: value for key, value in zip(keys, values, strict=False) if value}))
        try:
            found = preview(self._policy, self._modes.policy_modes, self._modes.document, asked, self._clock(), windows)
        except ModeRefused as refused:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(refused))
            raise  # abort raises; this is for the type checker
        return preview_to_wire(found)

    async def ListModeChanges(
        self,
        request: admin_pb2.ListModeChangesRequest,
        context: grpc.aio.ServicerContext[admin_pb2.ListModeChangesRequest, admin_pb2.ListModeChangesResponse],
    ) -> admin_pb2.ListModeChangesResponse:
        changes = self._modes.changes(min(request.limit or 100, MAX_LISTED_CHANGES))
        return admin_pb2.ListModeChangesResponse(changes=[_change_to_wire(c) for c in changes])

    def _actor(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        """The caller's name from its token; without tokens, the x-argwatch-actor metadata or its address."""
        if self._tokens is not None:
            caller = self._tokens.caller(context.invocation_metadata())
            if caller is not None:
                return caller.name
        return _actor(context)

    async def GetShapeReport(
        self,
        request: admin_pb2.GetShapeReportRequest,
        context: grpc.aio.ServicerContext[admin_pb2.GetShapeReportRequest, admin_pb2.GetShapeReportResponse],
    ) -> admin_pb2.GetShapeReportResponse:
        counts, covered = self._windows.window(request.window_seconds)
        response = admin_pb2.GetShapeReportResponse(
            window_seconds=request.window_seconds,
            covered_seconds=int(covered),
            taken_at=wire.timestamp(self._clock()),
        )
        rows = rows_from_counts(self._policy, fold(counts))
        if len(rows) > MAX_SHAPE_ROWS:  # the most out-of-set first; the rest counted, so the answer stays small
            response.rows_left_off = len(rows) - MAX_SHAPE_ROWS
            rows = sorted(rows, key=lambda row: -row.counts.out_of_set)[:MAX_SHAPE_ROWS]
        for row in rows:
            out = response.rows.add(
                tool=row.tool,
                argument=row.argument,
                value_set=row.value_set,
                checks=row.counts.checks,
                out_of_set=row.counts.out_of_set,
                out_of_set_rate=row.counts.out_of_set_rate,
                out_of_set_normalised=row.counts.out_of_set_normalised,
                out_of_set_normalised_rate=row.counts.out_of_set_normalised_rate,
            )
            for shape, count, share in row.shapes:
                out.shapes.add(shape=shape, count=count, share=share)
        return response


def _add_tool_windows(status: admin_pb2.ToolStatus, figures: ToolWindows) -> None:
    status.windows.extend(_window_to_wire(window) for window in figures.windows)
    status.calls_per_minute.extend(figures.calls_per_minute)
    status.recent.CopyFrom(_window_to_wire(figures.recent))


def _window_to_wire(figures: WindowFigures) -> admin_pb2.WindowFigures:
    counts = figures.counts
    wire_figures = admin_pb2.WindowFigures(
        window_seconds=figures.window_seconds,
        covered_seconds=figures.covered_seconds,
        per_second=figures.per_second,
        value_checks=counts.checks,
        out_of_set=counts.out_of_set,
        out_of_set_rate=counts.out_of_set_rate,
        out_of_set_normalised=counts.out_of_set_normalised,
        out_of_set_normalised_rate=counts.out_of_set_normalised_rate,
        problems=counts.problems,
        failed_open=counts.failed_open,
        shapes=counts.shapes,
    )
    if isinstance(counts, ToolCounts):
        wire_figures.calls = counts.calls
        wire_figures.rejected = counts.rejected
        wire_figures.rejected_rate = counts.rejected_rate
        wire_figures.repair_started = counts.repair_started
        wire_figures.repair_succeeded = counts.repair_succeeded
        wire_figures.repair_abandoned = counts.repair_abandoned
        wire_figures.repeats = counts.repeats
        wire_figures.calls_with_problems = counts.with_problems
        wire_figures.calls_with_invented_values = counts.with_invented
    return wire_figures


def shared_age(key: Any, build_seconds: Mapping[Any, float], served_at: Mapping[Any, float], now: float) -> float:
    """How long the snapshot of selection `key` is shared: with N selections watched now (asked for within
    WATCHED_SECONDS), each is built at most once every N times its own build over STATUS_LOOP_SHARE, so that
    together they take at most that share of the event loop, and a cheap one stays fresh beside a costly one;
    never longer than MAX_SHARED_SECONDS."""
    watched = sum(1 for at in served_at.values() if now - at <= WATCHED_SECONDS)
    return min(max(watched, 1) * build_seconds.get(key, 0.0) / STATUS_LOOP_SHARE, MAX_SHARED_SECONDS)


def _modes_to_show(fleet: Sequence[Mapping[str, Any]], chosen: Sequence[str]) -> set[str]:
    """The tools a selection's replica reports name: those it carries, and those the reporting replicas'
    modes disagree on, a replica lacking one included (a skew on-call must see, whatever the screen shows)."""
    reporting = [
        {str(tool): str(mode) for tool, mode in dict(report.get("modes", {})).items()}
        for report in fleet
        if report.get("reporting")
    ]
    named = {tool for modes in reporting for tool in modes}
    return set(chosen) | {tool for tool in named if len({modes.get(tool) for modes in reporting}) > 1}


async def _selection_of(message: admin_pb2.StatusSelection, context: grpc.aio.ServicerContext[Any, Any]) -> Selection:
    try:
        return read_selection(message)
    except ValueError as error:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        raise AssertionError("unreachable") from None  # abort raises


def _set_status(state: SetStatus) -> admin_pb2.ValueSetStatus:
    status = admin_pb2.ValueSetStatus(
        name=state.config.name,
        source=state.config.source,
        available=state.available,
        stale=state.stale,
        source_connected=state.source_connected,
        last_error=state.last_error,
        stale_cause=int(state.cause),  # type: ignore[arg-type]
        last_transport_error=state.transport_error,
    )
    if state.refusal is not None:
        status.last_refused_reason = state.refusal.reason
        status.last_refused_at.CopyFrom(wire.timestamp(state.refusal.at))
    if state.transport_error:
        status.last_transport_error_at.CopyFrom(wire.timestamp(state.transport_error_at))
    if state.snapshot is not None:
        status.version = state.snapshot.version
        status.members = state.snapshot.size
        status.age_seconds = state.age_seconds
        status.confirmed_at.CopyFrom(wire.timestamp(state.confirmed_at))
    return status


def _actor(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """Who is calling: the x-argwatch-actor metadata if given, else the peer address."""
    for key, value in context.invocation_metadata() or ():
        if key == "x-argwatch-actor" and value:
            return str(value)[:200]
    return str(context.peer())


def _change_to_wire(change: ModeChange) -> admin_pb2.ModeChange:
    message = admin_pb2.ModeChange(
        at=wire.timestamp(change.at),
        actor=change.actor,
        tool=change.target,
        old_mode=change.old,
        new_mode=change.new,
        reason=change.reason,
        outcome=change.outcome,
        check=change.check,
    )
    if change.expires_at is not None:
        message.expires_at.CopyFrom(wire.timestamp(change.expires_at))
    return message


def _tool_status(tool: str, mode: int, totals: ToolCounts) -> admin_pb2.ToolStatus:
    return admin_pb2.ToolStatus(
        tool=tool,
        mode=mode,  # type: ignore[arg-type]
        calls=totals.calls,
        allowed=totals.allowed,
        rejected=totals.rejected,
        out_of_set=totals.out_of_set,
        out_of_set_normalised=totals.out_of_set_normalised,
        value_checks=totals.checks,
        unavailable=totals.unavailable,
        repeats=totals.repeats,
        stale_checks=totals.stale_checks,
    )


async def _within_limits(context: grpc.aio.ServicerContext[Any, Any], *fields: tuple[str, str, int]) -> None:
    """INVALID_ARGUMENT for text the audit would keep past its limit (bounded, as the Gateway's strings are)."""
    for field, text, limit in fields:
        if len(text) > limit:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is {len(text)} characters; at most {limit}")


async def _requested_mode(
    context: grpc.aio.ServicerContext[Any, Any], request: admin_pb2.SetModeRequest
) -> Mode | None:
    """The mode a SetModeRequest sets (None: it clears), once its strings are within their limits; aborts
    INVALID_ARGUMENT otherwise. SetMode and PreviewChange read a change alike."""
    # What is audited is kept: bounded, as the Gateway's strings are (request_limits.py).
    await _within_limits(
        context,
        ("tool", request.tool, MAX_TOOL),
        ("check", request.check, MAX_CHECK),
        ("reason", request.reason, MAX_REASON),
    )
    # MODE_UNSPECIFIED clears the override; a number the contract does not define is refused,
    # never read as "clear" (which would quietly undo an on-call's reject).
    if request.mode != gateway_pb2.MODE_UNSPECIFIED and request.mode not in wire.MODES_FROM_WIRE:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"mode {request.mode} is not a mode: MODE_OBSERVE, MODE_REJECT, or MODE_UNSPECIFIED to clear",
        )
    if request.failure or request.check.startswith(FAILURE_PREFIXES):
        return await _failure_mode(context, request)
    return wire.MODES_FROM_WIRE.get(request.mode)


async def _failure_mode(context: grpc.aio.ServicerContext[Any, Any], request: admin_pb2.SetModeRequest) -> Mode | None:
    """A failure override's mode as the document keeps it (observe: fail open), or None to clear it."""
    if request.tool or not request.check.startswith(FAILURE_PREFIXES):
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            "a failure override names no tool, and a check that is a source, a set or a record kind "
            '("source:orders_db", "set:<name>", "record_kind:order")',
        )
    if request.mode != gateway_pb2.MODE_UNSPECIFIED:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a failure override takes failure, not mode")
    if request.failure not in ("open", "closed", ""):
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"failure is open, closed, or empty to clear; got {request.failure!r}"
        )
    return {"open": Mode.OBSERVE, "closed": Mode.REJECT}.get(request.failure)


def _checks_that_can_run(provider: ValueSetProvider, record_clients: Mapping[str, RecordClient]) -> set[str]:
    """The sets available now and the record sources that answered their latest look-up, as "set:<name>"
    and "source:<name>": the state now, read once per snapshot."""
    can_run = {f"set:{state.config.name}" for state in provider.statuses() if state.available}
    can_run.update(f"source:{name}" for name, client in record_clients.items() if client.answering)
    return can_run


def _check_policies(
    policy: Policy,
    tool_name: str,
    modes: ModeDocument,
    can_run: set[str],
    failures: Mapping[str, Failure] = MappingProxyType({}),
) -> list[admin_pb2.CheckPolicy]:
    """Each check of a tool, whether it fails closed (as `policy` has it, or as on-call's failure overrides
    make it now), its on-call override if any, and whether it can run now (`can_run`, _checks_that_can_run)."""
    tool = policy.tools.get(tool_name)
    if tool is None:
        return []
    checks = [
        admin_pb2.CheckPolicy(
            check=f"set:{binding.value_set}",
            argument=binding.name,
            fails_closed=set_failure(policy.value_sets[binding.value_set], failures) is Failure.CLOSED,
            name=f"{ARG}{binding.name}",
            available_now=f"set:{binding.value_set}" in can_run,
            failure_targets=[
                f"{VALUE_SET}{binding.value_set}",
                f"{SOURCE}{policy.value_sets[binding.value_set].source}",
            ],
        )
        for binding in tool.arguments
    ]
    checks += [
        admin_pb2.CheckPolicy(
            check=f"{RECORD}{record.name}",
            argument=record.id_argument,
            fails_closed=record_failure(record, failures) is Failure.CLOSED,
            name=f"{RECORD}{record.name}",
            available_now=f"source:{record.source}" in can_run,
            failure_targets=[f"{RECORD_KIND}{record.kind}", f"{SOURCE}{record.source}"],
        )
        for record in tool.records
    ]
    records_answer = all(f"source:{record.source}" in can_run for record in tool.records)  # what rules read
    checks += [
        admin_pb2.CheckPolicy(
            check=f"{RULE}{rule.name}",
            argument=rule.argument,
            fails_closed=rule.on_error is Failure.CLOSED,
            name=f"{RULE}{rule.name}",
            available_now=records_answer,
        )
        for rule in tool.rules
    ]
    # The schema and the repeat check read no source: they can always run.
    if tool.schema is not None:
        checks.append(admin_pb2.CheckPolicy(check=SCHEMA_CHECK, name=SCHEMA_CHECK, available_now=True))
    if tool.side_effect is not None:
        checks.append(admin_pb2.CheckPolicy(check=REPEAT_CHECK, name=REPEAT_CHECK, available_now=True))
    for check in checks:
        override = modes.override(tool_name, check.name)
        if override is not None:
            check.override_mode = override.mode.value
            check.override_actor = override.actor
            check.override_reason = override.reason
            if override.expires_at is not None:
                check.override_expires_at.CopyFrom(wire.timestamp(override.expires_at))
    return checks


OFFENDER_SAMPLES = "this replica's offending values since it started"


def offender_samples(offenders: OffenderTable, policy: Policy) -> dict[SampleKey, SampledValues]:
    """The offending values counted per tool and argument, as coverage reads them (the policy's tools only)."""
    samples: dict[SampleKey, SampledValues] = {}
    seen = offenders.keys()  # a list (sorted), not a dict's view
    for tool, argument in seen:
        if tool not in policy.tools:
            continue  # _unknown: no tool of the policy to suggest a binding on
        found = offenders.offenders(tool, argument, MAX_VALUES + 1)
        values = tuple(row.value for row in found.rows if row.value != OTHER)
        complete = len(values) == len(found.rows)
        samples[tool, argument] = SampledValues(found.total, len(values), values, complete)
    return samples


def _failed(walk: asyncio.Task[PolicySurface]) -> bool:
    return walk.done() and (walk.cancelled() or walk.exception() is not None)


MAX_COVERAGE_NAME = 256  # an argument's path as listed: names come from third-party tool definitions
MAX_COVERAGE_BYTES = 3 << 20  # rows past this are counted, not listed: the answer stays under gRPC's 4 MiB


def coverage_to_wire(found: PolicyCoverage, samples: str) -> admin_pb2.GetCoverageResponse:
    """The coverage as the Admin API answers it (`argwatch coverage --policy` prints the same message).
    Rows are listed while the answer stays under MAX_COVERAGE_BYTES; the rest are counted as left off."""
    response = admin_pb2.GetCoverageResponse(
        policy_version=found.policy_version,
        counts=_counts_to_wire(found),
        suggestions_left_off=found.suggestions_left_off,
        samples=samples,
    )
    size = 0
    for tool in found.tools:
        out = response.tools.add(
            tool=tool.tool,
            counts=_counts_to_wire(tool),
            arguments_left_off=tool.left_off,
            undeclared_arguments=tool.undeclared,
        )
        for row in tool.arguments:
            argument = row.argument if len(row.argument) <= MAX_COVERAGE_NAME else row.argument[:255] + "…"
            row_bytes = 16 + len(argument) + sum(len(constraint) + 2 for constraint in row.constraints)
            if size + row_bytes > MAX_COVERAGE_BYTES:
                out.arguments_left_off += 1
                continue
            size += row_bytes
            out.arguments.add(argument=argument, coverage=row.coverage.value, constraints=row.constraints)
    for suggestion in found.suggestions:
        argument = suggestion.argument[:MAX_COVERAGE_NAME]
        response.suggestions.add(
            tool=suggestion.tool, argument=argument, binding=suggestion.binding, reason=suggestion.reason
        )
    return response


def _counts_to_wire(found: PolicyCoverage | ToolCoverage) -> admin_pb2.CoverageCounts:
    counts = found.counts
    return admin_pb2.CoverageCounts(
        enumerated=counts.enumerated,
        checked=counts.checked,
        typed=counts.typed,
        unconstrained=counts.unconstrained,
        covered_share=counts.share,
    )
