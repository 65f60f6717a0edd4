"""Builds the gateway process (Gateway and Admin gRPC servers, health, reflection, metrics) and runs its lifecycle.

`build_gateway` is the one factory: the command line calls it, and the tests
call it with listeners on 127.0.0.1:0 and their own registry, cache and clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry

from argwatch.common.tasks import cancel_and_wait
from argwatch.server.decisions.sink import DecisionSink, NoDecisionLog
from argwatch.server.decisions.writer import DROP_REASONS, DecisionLogWriter, LogLimits, open_decision_log
from argwatch.server.edge.admin_auth import MODE_METHODS, AdminAuthInterceptor, TokenBook, load_tokens
from argwatch.server.edge.admin_service import AdminServicer
from argwatch.server.edge.admission import Admission, Limits
from argwatch.server.edge.gateway_service import GatewayServicer, add_gateway_to_server
from argwatch.server.edge.native_answers import NativeAnswers
from argwatch.server.edge.probes import CappedHealth, add_capped_reflection
from argwatch.server.edge.reloading import ReloadResult
from argwatch.server.modes.control import LocalModes, ModeControl
from argwatch.server.modes.fleet import SharedModes
from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import FileSourceConfig, GrpcSourceConfig, Policy, SourceConfig
from argwatch.server.process.listener_options import gateway_server_options, rpc_ceiling
from argwatch.server.process.metrics_listener import MetricsListener
from argwatch.server.process.reload import PolicyReloader
from argwatch.server.process.settings import Settings
from argwatch.server.process.shadow_control import ShadowControl
from argwatch.server.process.tls import check_tls_settings, server_credentials
from argwatch.server.records.lookup_client import RecordClient
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.repair.tracker import RepairTracker
from argwatch.server.sets.payload import SetFetcher
from argwatch.server.shadow.runner import ShadowRunner
from argwatch.server.state.cache import Cache
from argwatch.server.state.operations import OperationLog
from argwatch.server.state.shared_cache import SharedCache, redis_from_url
from argwatch.server.telemetry.call_signatures import IDLE_SECONDS, CallSignatures, SignatureKey
from argwatch.server.telemetry.count_windows import CountWindows
from argwatch.server.telemetry.counts import CountKey
from argwatch.server.telemetry.events import EventLog
from argwatch.server.telemetry.metrics import GatewayMetrics, ToolMeters
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog, dropped_sample_records
from argwatch.server.validator import Validator
from argwatch.server.valuesets.file_source import FileSetFetcher
from argwatch.server.valuesets.grpc_source import GrpcSetFetcher
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2

if TYPE_CHECKING:  # imported at run time only with --otlp-endpoint (_tracing)
    from argwatch.server.tracing.pipeline import Tracing

log = logging.getLogger("argwatch.server")

RATE_STEP_SECONDS = 60.0
GATEWAY_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].full_name
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name


def make_fetcher(config: SourceConfig, max_members: Mapping[str, int] | None = None) -> SetFetcher:
    """The fetcher of one source; `max_members`: each of its sets' limit, kept to as a set arrives in parts."""
    if isinstance(config, FileSourceConfig):
        return FileSetFetcher(config.path)
    return GrpcSetFetcher(config, max_members)


@dataclass
class ServedPolicy:
    """The policy in use and what is built from it. A reload replaces every field at once (no await between),
    so whoever holds this object (the fleet report, the gateway) sees the new policy whole."""

    policy: Policy
    provider: ValueSetProvider
    record_clients: Mapping[str, RecordClient]
    validator: Validator


@dataclass
class RunningGateway:
    """A started gateway: its bound ports and the parts tests look at."""

    settings: Settings
    serving: ServedPolicy
    port: int
    admin_port: int
    metrics_port: int
    registry: CollectorRegistry
    metrics: GatewayMetrics
    modes: ModeStore
    control: ModeControl
    cache: Cache
    repairs: RepairTracker
    windows: CountWindows[CountKey]
    signature_windows: CountWindows[SignatureKey]
    background: list[asyncio.Task[None]]
    health: health.aio.HealthServicer
    admin: AdminServicer
    gateway_servicer: GatewayServicer
    # What depends on the policy, built for another one (a reload), with each tool's metric children if built.
    rebuild: Callable[[Policy, Mapping[str, SetFetcher] | None, Mapping[str, ToolMeters] | None], ServedPolicy]
    _server: grpc.aio.Server
    _admin_server: grpc.aio.Server
    _metrics_listener: MetricsListener
    reloader: PolicyReloader | None = None
    shadow: ShadowControl | None = None
    decisions: DecisionSink = field(default_factory=NoDecisionLog)  # a DecisionLogWriter with --decision-log
    tracing: Tracing | None = None  # with --otlp-endpoint
    _stopped: bool = False

    @property
    def policy(self) -> Policy:
        return self.serving.policy

    @property
    def provider(self) -> ValueSetProvider:
        return self.serving.provider

    @property
    def validator(self) -> Validator:
        return self.serving.validator

    @property
    def record_clients(self) -> Mapping[str, RecordClient]:
        return self.serving.record_clients

    async def reload(self, actor: str = "argwatch", reason: str = "reload") -> ReloadResult:
        """Reads the policy file again and serves it if it loads (process/reload.py)."""
        assert self.reloader is not None
        return await self.reloader.reload(actor, reason)

    @property
    def target(self) -> str:
        return f"{_host(self.settings.listen)}:{self.port}"

    @property
    def admin_target(self) -> str:
        return f"{_host(self.settings.admin_listen)}:{self.admin_port}"

    async def wait(self) -> None:
        await self._server.wait_for_termination()

    async def stop(self, grace: float | None = None) -> None:
        """Reports NOT_SERVING first, lets in-flight calls finish within the grace period, then closes."""
        if self._stopped:
            return  # idempotent: a second stop (a test's teardown, a second signal) is a no-op
        self._stopped = True
        grace = self.settings.grace_seconds if grace is None else grace
        await self.health.enter_graceful_shutdown()
        self.admin.end_watches()  # a TUI watching must not hold the shutdown for the whole grace period
        # Both listeners at once: from here new calls are refused on each, and in-flight ones drain.
        await asyncio.gather(self._admin_server.stop(grace), self._server.stop(grace))
        if self.reloader is not None:
            await self.reloader.close()
        if self.shadow is not None:
            await self.shadow.runner.close()
        await self.provider.close()
        await self.repairs.close()
        await self.windows.close()
        await self.signature_windows.close()
        await self.control.close()
        await cancel_and_wait(self.background)
        for client in self.record_clients.values():
            await client.close()
        if hasattr(self.cache, "close"):
            await self.cache.close()
        await self._metrics_listener.close()
        if isinstance(self.decisions, DecisionLogWriter):  # after the last call: every verdict is written
            await asyncio.to_thread(self.decisions.close)
        if self.tracing is not None:  # after the decision log: its last lines are exported too
            await asyncio.to_thread(self.tracing.shutdown)
        log.info("stopped")


async def build_gateway(
    settings: Settings,
    *,
    policy: Policy | None = None,
    registry: CollectorRegistry | None = None,
    cache: Cache | None = None,
    fetchers: Mapping[str, SetFetcher] | None = None,
    clock: Callable[[], float] = time.time,
    extra_services: Callable[[grpc.aio.Server], list[str]] | None = None,
    reconnect_cap_seconds: float = 10.0,
    shadow_policy: Policy | None = None,
) -> RunningGateway:
    """Builds and starts a gateway; returns once every value set was tried once and health is SERVING.

    `extra_services` may add servicers to the Gateway server (the benchmark's
    echo baseline) and returns their full names for reflection;
    `reconnect_cap_seconds` caps the backoff between reconnects to a source;
    `shadow_policy`: settings.shadow_policy already loaded (else it is loaded here: ValueError if it does not).
    """
    policy = policy or load_policy(settings.policy)
    if shadow_policy is None and settings.shadow_policy:
        try:  # before anything opens: a shadow asked for and not loaded refuses the start
            shadow_policy = load_policy(settings.shadow_policy)
        except PolicyError as error:
            raise ValueError(f"--shadow-policy: {error}") from None
    tokens = _admin_tokens(settings)  # first: a refused configuration opens nothing
    check_tls_settings(settings)
    registry = registry if registry is not None else CollectorRegistry()
    metrics = GatewayMetrics(registry)
    if cache is None:
        cache = SharedCache(redis_from_url(settings.redis) if settings.redis else None, metrics)
    metrics.count_dropped_samples(dropped_sample_records)
    metrics.policy_serving(policy.version)
    modes = ModeStore(policy, settings.global_mode, state_file=settings.mode_state, clock=clock)
    modes.subscribe(lambda tool, mode: metrics.mode_in_force(tool, mode.value == "reject"))
    repairs = RepairTracker(cache, metrics, policy.repair.remember_seconds, clock=clock)
    windows = CountWindows(metrics.count_changes, changes_only=True)
    signatures = CallSignatures()  # the calls by refusal signature, what a mode change's preview reads
    signature_windows = CountWindows(signatures.counts, forget_idle=(IDLE_SECONDS, signatures.forget))
    offenders = OffenderTable(clock)
    operations = OperationLog(cache, clock)
    events = EventLog(clock)  # the incident timeline, kept across reloads
    # Kept across reloads: each new Validator hands it the calls it decided.
    shadow = ShadowRunner(metrics, modes, max_in_flight=settings.shadow_max_in_flight, clock=clock)

    def rebuild(
        chosen: Policy, given: Mapping[str, SetFetcher] | None = None, meters: Mapping[str, ToolMeters] | None = None
    ) -> ServedPolicy:
        """Everything that depends on the policy: at start, and again for a reload (which passes each tool's
        metric children, built in turns of the loop: validator/tool_meters.py)."""
        provider = ValueSetProvider(
            chosen,
            given or {name: make_fetcher(config, limits_of(chosen, name)) for name, config in chosen.sources.items()},
            cache,
            metrics,
            clock=clock,
            backoff_cap=reconnect_cap_seconds,
            snapshot_dir=settings.snapshot_dir,
            events=events,
        )
        record_clients = record_clients_for(chosen, metrics)
        samples = SampledValueLog(chosen.sampling.rate, chosen.sampling.max_value_chars, clock=clock)
        rejections = RejectionLog(cache, chosen.repair, lambda: metrics.shared_cache_rejected("cut_to_limits"))
        validator = Validator(
            chosen,
            provider,
            modes,
            metrics,
            samples,
            rejections,
            record_clients,
            offenders,
            repairs=repairs,
            operations=operations,
            signatures=signatures,
            decisions=decisions,
            shadow=shadow,
            answers=NativeAnswers(provider, modes, repairs, signatures, metrics.validate_seconds.buckets),
            meters=meters,
        )
        return ServedPolicy(chosen, provider, record_clients, validator)

    tracing = _tracing(
        settings, registry
    )  # before any listener: without the extra installed, refused with what to install
    # Before any listener: a folder it cannot write refuses.
    try:
        decisions = _decision_log(settings, metrics, clock, tracing)
    except BaseException:
        if tracing is not None:
            tracing.shutdown()
        raise
    serving = rebuild(policy, fetchers)
    provider, record_clients, validator = serving.provider, serving.record_clients, serving.validator
    control: ModeControl = (
        SharedModes(
            modes,
            settings.redis,
            metrics,
            replica_id=settings.replica_id,
            report=_replica_report(serving, modes),
        )
        if settings.redis
        else LocalModes(modes, "file" if settings.mode_state else "memory")
    )

    admin = AdminServicer(
        replica_id=settings.replica_id,
        policy_version=policy.version,
        modes=modes,
        control=control,
        metrics=metrics,
        provider=provider,
        policy=policy,
        windows=windows,
        offenders=offenders,
        tokens=tokens,
        clock=clock,
        events=events,
        record_clients=record_clients,
        signatures=signature_windows,
    )
    health_servicer = CappedHealth()
    # The Gateway's methods are admitted by their own caps (edge/admission.py), health and reflection by
    # theirs (edge/probes.py): gRPC's one cap counted every RPC alike, so streams that never sent once refused
    # every caller and the probes with them. gRPC's cap stays as a ceiling for memory, well above those: it
    # also counts what no handler does, a call whose answer waits on a client that stopped reading.
    server = grpc.aio.server(
        options=gateway_server_options(settings), maximum_concurrent_rpcs=rpc_ceiling(settings.max_concurrent_rpcs)
    )
    admin_server = grpc.aio.server(
        options=[("grpc.so_reuseport", 0)],
        interceptors=[AdminAuthInterceptor(tokens, _refusal_recorder(metrics, control))] if tokens else None,
    )
    max_streams, per_peer = settings.stream_limits
    admission = Admission(
        Limits(settings.max_concurrent_rpcs, max_streams, per_peer), metrics.rpc_shed, metrics.streams_open.set
    )
    servicer_options: dict[str, Any] = {
        "stream_idle_seconds": settings.stream_idle_seconds,
        "observe_seconds": metrics.validate_seconds.observe,
        "on_idle_close": metrics.stream_idle_closed,
    }
    gateway_servicer = (
        GatewayServicer(validator, admission, **servicer_options)
        if tracing is None
        else tracing.gateway_servicer(validator, admission, metrics.validate_seconds.observe_traced, **servicer_options)
    )
    metrics_listener = MetricsListener(registry, metrics.metrics_scrape_refused)
    try:
        port, admin_port = _listen(
            settings, server, admin_server, gateway_servicer, health_servicer, extra_services, admin
        )
        metrics_host, metrics_port = _split(settings.metrics_listen)
        try:
            await metrics_listener.start(metrics_host or "0.0.0.0", metrics_port)
        except OSError as error:
            raise OSError(f"cannot listen on {settings.metrics_listen} (metrics): {error.strerror}") from None
    except BaseException:
        # Release whatever was bound before the failure, so no port or channel outlives it.
        if isinstance(decisions, DecisionLogWriter):
            decisions.close()
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)
        await metrics_listener.close()
        await server.stop(None)
        await admin_server.stop(None)
        await provider.close()
        for client in record_clients.values():
            await client.close()
        raise

    # The first read of the counts folds every series the policy made (some 82,000 keys at 10,000 tools): here,
    # before a call can arrive, rather than in the first sample while calls wait (count_feed.py).
    windows.live()
    for name in ("", GATEWAY_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.start()
    await admin_server.start()
    if isinstance(cache, SharedCache):
        await cache.start()
    missing = await provider.start(settings.startup_timeout_seconds)
    if missing:
        # Serving anyway, by design: checks against these sets fail open (or closed) and are
        # counted, and argwatch_value_set_available shows them as 0 until they load.
        log.warning(
            "start-up: %d value set(s) not loaded within %.1fs, serving without them until they load: %s",
            len(missing),
            settings.startup_timeout_seconds,
            ", ".join(f"{name} ({provider.last_error(name)})" for name in missing),
        )
    else:
        log.info("start-up: all %d value sets loaded", len(policy.value_sets))
    repairs.start()
    windows.start()
    signature_windows.start()
    await control.start()  # with Redis: the fleet's modes before the first call (Redis down: the last known, reported)
    expiring = asyncio.get_running_loop().create_task(_expire_overrides(control))
    rates = asyncio.get_running_loop().create_task(_watch_rates(admin))
    for name in ("", GATEWAY_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    running = RunningGateway(
        settings=settings,
        serving=serving,
        port=port,
        admin_port=admin_port,
        metrics_port=metrics_listener.port,
        registry=registry,
        metrics=metrics,
        modes=modes,
        control=control,
        cache=cache,
        repairs=repairs,
        windows=windows,
        signature_windows=signature_windows,
        background=[expiring, rates],
        health=health_servicer,
        admin=admin,
        gateway_servicer=gateway_servicer,
        rebuild=rebuild,
        _server=server,
        _admin_server=admin_server,
        _metrics_listener=metrics_listener,
        decisions=decisions,
        tracing=tracing,
    )
    running.reloader = PolicyReloader(running, clock)
    admin.attach_reloader(running.reloader)
    running.shadow = ShadowControl(running, shadow, clock)
    shadow.watch(lambda: running.serving.validator)
    admin.attach_shadow(running.shadow)
    if shadow_policy is not None:
        assert settings.shadow_policy is not None
        await running.shadow.set_policy(shadow_policy, settings.shadow_policy, "command line", "--shadow-policy")
    log.info(
        "serving policy %s (%d tools) on %s, admin on %s, metrics on :%d",
        policy.version,
        len(policy.tools),
        running.target,
        running.admin_target,
        running.metrics_port,
    )
    return running


def _tracing(settings: Settings, registry: CollectorRegistry) -> Tracing | None:
    """The OpenTelemetry pipeline with --otlp-endpoint; None (and nothing of OpenTelemetry imported) without it.
    ValueError, saying what to install, when the flag is given and the extra is not installed."""
    if settings.otlp_endpoint is None:
        return None
    try:
        from argwatch.server.tracing.pipeline import Tracing
    except ImportError as error:
        if not (error.name or "").startswith("opentelemetry"):
            raise  # a fault of ours, not a missing extra
        raise ValueError(
            f"--otlp-endpoint needs OpenTelemetry, which is not installed: install argwatch[otel] ({error})"
        ) from None
    return Tracing(settings.otlp_endpoint, settings.replica_id, registry, sample_ratio=settings.otlp_sample_ratio)


def _decision_log(
    settings: Settings, metrics: GatewayMetrics, clock: Callable[[], float], tracing: Tracing | None
) -> DecisionSink:
    """The decision log's writer with --decision-log (ValueError if its folder cannot be written), else none."""
    if settings.decision_log is None:
        return NoDecisionLog()
    limits = LogLimits(
        max_bytes=settings.decision_log_max_bytes,
        rotate_bytes=settings.decision_log_rotate_bytes,
        rotate_seconds=settings.decision_log_rotate_seconds,
        queue=settings.decision_log_queue,
    )
    if tracing is None or not settings.decision_log_otlp:
        dropped = metrics.decision_log_drops(DROP_REASONS)
        return open_decision_log(
            settings.decision_log, limits, dropped, key_file=settings.decision_log_key, clock=clock
        )
    from argwatch.server.tracing.log_export import OTLP_DROP_REASONS

    dropped = metrics.decision_log_drops((*DROP_REASONS, *OTLP_DROP_REASONS))
    export = tracing.decision_log_export(settings.decision_log_queue, dropped)
    return open_decision_log(
        settings.decision_log, limits, dropped, key_file=settings.decision_log_key, clock=clock, forward=export.forward
    )


def _admin_tokens(settings: Settings) -> TokenBook | None:
    """The Admin API's tokens; an Admin listener off loopback without them is refused (ValueError)."""
    if settings.admin_tokens:
        return load_tokens(settings.admin_tokens, allow_readable=settings.allow_readable_tokens)
    host = _split(settings.admin_listen)[0]
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(
            f"the Admin API listens on {settings.admin_listen}, beyond loopback, with no --admin-tokens: "
            "anyone who reaches it could change modes"
        )
    return None


def _refusal_recorder(metrics: GatewayMetrics, modes: ModeControl) -> Callable[[str, str, Any], None]:
    known = {f"/{ADMIN_SERVICE}/{name}" for name in admin_pb2.DESCRIPTOR.services_by_name["Admin"].methods_by_name}

    def record(method: str, reason: str, metadata: Any) -> None:
        kind = reason.split(":", 1)[0]
        metrics.admin_call_refused(method.rsplit("/", 1)[-1] if method in known else "_unknown", kind)
        # Only a caller the tokens name is audited (a read-only token trying to change a mode): one with no
        # valid token is counted above and changes nothing durable, so no flood of them can fill the trail.
        if method in MODE_METHODS and kind == "permission_denied":
            modes.record_refusal(reason.split(":", 1)[1], kind)

    return record


async def _watch_rates(admin: AdminServicer) -> None:
    """Once a minute, steps in an argument's out-of-set rate go to the incident timeline."""
    while True:
        await asyncio.sleep(RATE_STEP_SECONDS)
        try:
            admin.look_for_rate_steps()
        except Exception:  # the timeline must not stop for good over one bad minute
            log.exception("looking for rate steps failed; trying again in a minute")


async def _expire_overrides(modes: ModeControl) -> None:
    """Reverts expired mode overrides within a second of their expiry (each audited)."""
    while True:
        await asyncio.sleep(1.0)
        await modes.expire_due()


def _replica_report(serving: ServedPolicy, modes: ModeStore) -> Callable[[], dict[str, Any]]:
    """This replica's report for the fleet view: what it enforces and what it holds (after a reload, the new)."""

    def report() -> dict[str, Any]:
        policy, statuses = serving.policy, serving.provider.statuses()
        sources: dict[str, bool] = {}
        for state in statuses:
            sources[state.config.source] = sources.get(state.config.source, True) and state.source_connected
        override = modes.global_override
        return {
            "policy_version": policy.version,
            "global_mode": override.value if override else "",
            "modes": {tool: mode.value for tool, mode in modes.tool_modes().items()},
            "value_sets": {s.config.name: s.snapshot.version if s.snapshot is not None else -1 for s in statuses},
            "sources": sources,
        }

    return report


def limits_of(policy: Policy, source: str) -> dict[str, int]:
    """max_members of each set the policy takes from `source`."""
    return {name: config.max_members for name, config in policy.value_sets.items() if config.source == source}


def record_clients_for(policy: Policy, metrics: GatewayMetrics) -> dict[str, RecordClient]:
    """One RecordSource client per source that records use, caching answers for the shortest record TTL."""
    ttls: dict[str, float] = {}
    for tool in policy.tools.values():
        for record in tool.records:
            ttls[record.source] = min(ttls.get(record.source, record.ttl_seconds), record.ttl_seconds)
    clients = {}
    for source, ttl in ttls.items():
        config = policy.sources[source]
        assert isinstance(config, GrpcSourceConfig)  # the policy loader allows only gRPC sources here
        clients[source] = RecordClient(config, ttl, on_evict=lambda: metrics.table_eviction("record_cache"))
    return clients


def _listen(
    settings: Settings,
    server: grpc.aio.Server,
    admin_server: grpc.aio.Server,
    gateway: GatewayServicer,
    health_servicer: health.aio.HealthServicer,
    extra_services: Callable[[grpc.aio.Server], list[str]] | None,
    admin: AdminServicer,
) -> tuple[int, int]:
    """Registers the servicers and binds the two gRPC listeners; raises OSError naming an address it cannot use."""
    add_gateway_to_server(gateway, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [GATEWAY_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME]
    if extra_services is not None:
        names += extra_services(server)
    add_capped_reflection(names, server)
    port = _bind(server, settings.listen, server_credentials(settings, admin=False))

    admin_pb2_grpc.add_AdminServicer_to_server(admin, admin_server)
    reflection.enable_server_reflection([ADMIN_SERVICE, reflection.SERVICE_NAME], admin_server)
    admin_port = _bind(admin_server, settings.admin_listen, server_credentials(settings, admin=True))
    return port, admin_port


def _bind(server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    # grpcio raises RuntimeError on a failed bind (older releases returned 0).
    try:
        if credentials is None:
            port = int(server.add_insecure_port(address))
        else:
            port = int(server.add_secure_port(address, credentials))
    except RuntimeError as error:
        raise OSError(f"cannot listen on {address}: {error}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _host(address: str) -> str:
    host = address.rpartition(":")[0]
    return "127.0.0.1" if host in ("", "0.0.0.0", "[::]") else host
