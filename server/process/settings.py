"""The one typed settings object, built once at the command line: flags > ARGWATCH_* environment > defaults."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from argwatch.common.durations import parse_duration, spoken
from argwatch.server.policy.model import Mode
from argwatch.server.state.redis_url import parse_redis_url


def _default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Settings:
    """How one gateway process runs. Domain code receives this; it never reads the environment."""

    policy: str
    listen: str = "0.0.0.0:50051"
    # Loopback by default: the Admin API shows internals and will change modes.
    admin_listen: str = "127.0.0.1:50052"
    # Loopback by default: /metrics has no authentication. Kubernetes (deploy/) sets 0.0.0.0:9464 for the scraper.
    metrics_listen: str = "127.0.0.1:9464"
    # Forces every tool into one mode (for example observe during an incident); None: per tool.
    global_mode: Mode | None = None
    # Where sampled offending values go: a file path, or "-" for standard output.
    sample_log: str = "-"
    replica_id: str = field(default_factory=_default_replica_id)
    # How long in-flight calls get to finish on SIGTERM.
    grace_seconds: float = 10.0
    # Health stays NOT_SERVING until every value set has loaded once, or this long.
    startup_timeout_seconds: float = 10.0
    # The Redis shared by replicas (pulled value sets, repair state, modes): redis://host:port/db, Sentinel
    # (redis+sentinel://host:port,.../service/db) or Cluster (redis+cluster://host:port,...); None: memory only.
    redis: str | None = None
    # YAML list of {name, role: read|admin, token} allowed on the Admin API; None: open,
    # which is allowed only when the Admin listener is on loopback.
    admin_tokens: str | None = None
    # A tokens file that others than its owner may read is refused at start, as ssh refuses such a
    # key, unless this says the operator accepts it (a mounted Secret whose mode cannot be set).
    allow_readable_tokens: bool = False
    # File keeping mode overrides and their audit across restarts (written atomically);
    # None: in memory only, and a restart returns every tool to the policy's mode.
    mode_state: str | None = None
    # Folder for last-good copies of value sets, read at start (a restart with a source down
    # serves them as stale); None: not kept.
    snapshot_dir: str | None = None
    log_level: str = "INFO"
    # PEM certificate chain and key for TLS on the Gateway and Admin listeners; empty: plaintext.
    tls_cert: str = ""
    tls_key: str = ""
    # PEM CA bundle: when set, the listener requires client certificates it signed (mTLS).
    tls_client_ca: str = ""
    admin_tls_client_ca: str = ""
    # Gateway processes on this host sharing the Gateway port (SO_REUSEPORT); see workers.py.
    workers: int = 1
    # Gateway RPCs served at once; beyond it a call is refused with RESOURCE_EXHAUSTED at
    # once instead of queueing without bound (a stream counts as one while it is open).
    # Health and reflection are not counted: no caller's load can refuse a probe.
    max_concurrent_rpcs: int = 1000
    # Of those, open ValidateStream calls: below max_concurrent_rpcs, so unary calls always keep
    # room (None: a quarter of it); and from one peer address (None: a quarter of max_streams).
    max_streams: int | None = None
    max_streams_per_peer: int | None = None
    # A stream with no request for this long is closed (DEADLINE_EXCEEDED, saying why).
    stream_idle_seconds: float = 30.0
    # Let other processes listen on the Gateway port too (SO_REUSEPORT): set for --workers'
    # workers. Off otherwise, so a second gateway on a port in use fails instead of silently
    # taking half the connections.
    reuse_port: bool = False
    # A shadow policy: every call judged by it too, never decided by it, the differences counted
    # (docs/policy.md). A file that does not load refuses the start. None: no shadow.
    shadow_policy: str | None = None
    # Shadow judgments awaiting at once (a record look-up); past it a call is not judged by the shadow,
    # counted as busy (never queued).
    shadow_max_in_flight: int = 64
    # Folder for the decision log (every verdict, one JSON line each); None: no decision log.
    decision_log: str | None = None
    # The log's total budget on disk: the oldest rotated files are deleted to stay within it.
    decision_log_max_bytes: int = 1 << 30
    # A file rotates (fsynced, gzipped) at this size or age.
    decision_log_rotate_bytes: int = 64 << 20
    decision_log_rotate_seconds: float = 3600.0
    # Lines waiting for the writer; beyond it lines are dropped and counted, never waited for.
    decision_log_queue: int = 10_000
    # File holding the MAC key for argument values (at least 32 bytes); None: made on first start, kept in the folder.
    decision_log_key: str | None = None
    # The OpenTelemetry collector (OTLP over gRPC) that spans of each Validate and Repair go to; None: no
    # tracing, and nothing of OpenTelemetry imported. Needs argwatch[otel].
    otlp_endpoint: str | None = None
    # The decision log's lines also go to --otlp-endpoint as OTLP log records (needs --decision-log).
    decision_log_otlp: bool = False
    # Of the calls that come without a traceparent, the fraction traced (a caller's own sampling decision is
    # always followed).
    otlp_sample_ratio: float = 1.0

    def __post_init__(self) -> None:
        streams, per_peer = self.stream_limits
        if streams >= self.max_concurrent_rpcs:
            given = "" if self.max_streams is not None else ", a quarter of --max-concurrent-rpcs by default,"
            raise ValueError(
                f"--max-streams ({streams}){given} must be below --max-concurrent-rpcs ({self.max_concurrent_rpcs}), "
                "so that unary calls always have room: --max-concurrent-rpcs must be at least 2"
            )
        if per_peer > streams:
            raise ValueError(f"--max-streams-per-peer ({per_peer}) must be at most --max-streams ({streams})")
        if self.stream_idle_seconds <= 0:
            raise ValueError("--stream-idle-seconds must be above zero")

        if 2 * self.decision_log_rotate_bytes > self.decision_log_max_bytes:
            # The budget keeps a whole current file's room: with less than two files' worth, each rotated file
            # would be deleted as it rotates.
            raise ValueError("--decision-log-rotate-bytes must be at most half of --decision-log-max-bytes")
        if self.decision_log_otlp and (self.otlp_endpoint is None or self.decision_log is None):
            raise ValueError("--decision-log-otlp needs --otlp-endpoint (where to send) and --decision-log (what)")

    @property
    def stream_limits(self) -> tuple[int, int]:
        """(max_streams, max_streams_per_peer), the defaults derived from max_concurrent_rpcs."""
        streams = self.max_streams if self.max_streams is not None else max(1, self.max_concurrent_rpcs // 4)
        per_peer = self.max_streams_per_peer if self.max_streams_per_peer is not None else max(1, streams // 4)
        return streams, per_peer


def parse_address(value: str) -> str:
    """Checks HOST:PORT (HOST may be empty, a name, an IPv4 address or [IPv6]); returns it unchanged."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT such as 127.0.0.1:50051, got {value!r}")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"expected an IPv6 host in brackets such as [::1]:50051, got {value!r}")
    return value


def parse_otlp_endpoint(value: str) -> str:
    """Checks HOST:PORT, http://HOST:PORT (both plaintext) or https://HOST:PORT (TLS); returns it unchanged."""
    scheme, found, address = value.partition("://")
    if found and scheme not in ("http", "https"):
        raise ValueError(f"expected HOST:PORT, http://HOST:PORT or https://HOST:PORT, got {value!r}")
    parse_address(address if found else value)
    return value


def _ratio(value: str) -> float:
    try:
        found = float(value)
    except ValueError:
        found = -1.0
    if not 0.0 <= found <= 1.0:
        raise ValueError(f"expected a fraction from 0 to 1, got {value!r}")
    return found


def _mode_or_none(value: str) -> Mode | None:
    if value in ("", "none"):
        return None
    try:
        return Mode(value)
    except ValueError:
        raise ValueError(f"expected observe, reject or none, got {value!r}") from None


def _redis_url(value: str) -> str:
    parse_redis_url(value)  # refused at start-up with what is wrong, not at the first Redis operation
    return value


def _boolean(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError(f"expected DEBUG, INFO, WARNING or ERROR, got {value!r}")
    return level


@dataclass(frozen=True, slots=True)
class _Option:
    name: str  # the Settings field
    help: str
    parse: Callable[[str], Any] = str
    metavar: str = "FILE"  # what --help shows the value as

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "ARGWATCH_" + self.name.upper()


SERVE_OPTIONS = (
    _Option("policy", "policy YAML file (required)"),
    _Option("listen", "the Gateway API's address", parse_address, "HOST:PORT"),
    _Option("admin_listen", "the Admin API's address (keep it private)", parse_address, "HOST:PORT"),
    _Option(
        "metrics_listen",
        "Prometheus /metrics address (no authentication: 0.0.0.0 only where the network is private)",
        parse_address,
        "HOST:PORT",
    ),
    _Option(
        "global_mode", "force every tool to observe or reject (none: per tool)", _mode_or_none, "{observe,reject,none}"
    ),
    _Option("sample_log", "file for sampled offending values, or - for stdout"),
    _Option("replica_id", "this replica's id in status and logs", str, "ID"),
    _Option("grace_seconds", "how long in-flight calls get on shutdown", parse_duration, "DURATION"),
    _Option("startup_timeout_seconds", "longest wait for every value set before serving", parse_duration, "DURATION"),
    _Option(
        "redis",
        "Redis shared by replicas (default: memory only): one Redis, redis://HOST:PORT/DB; Sentinel, "
        "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]; or Cluster, redis+cluster://HOST:PORT[,HOST:PORT...]",
        _redis_url,
        "URL",
    ),
    _Option(
        "admin_tokens", "YAML file of Admin API tokens {name, role: read|admin, token} (default: open, loopback only)"
    ),
    _Option(
        "allow_readable_tokens",
        "accept an --admin-tokens file that its group or others may read",
        _boolean,
        "{true,false}",
    ),
    _Option("mode_state", "file keeping mode overrides and their audit across restarts (default: memory)"),
    _Option(
        "snapshot_dir",
        "folder for last-good value-set copies, served stale after a restart (default: none)",
        str,
        "DIR",
    ),
    _Option("log_level", "how much to log", _log_level, "{DEBUG,INFO,WARNING,ERROR}"),
    _Option("tls_cert", "PEM certificate chain: TLS on the Gateway and Admin listeners (default: plaintext)"),
    _Option("tls_key", "PEM private key of --tls-cert"),
    _Option("tls_client_ca", "PEM CA bundle: the Gateway requires client certificates it signed (mTLS)"),
    _Option("admin_tls_client_ca", "PEM CA bundle: the Admin API requires client certificates it signed (mTLS)"),
    _Option(
        "workers",
        "gateway processes sharing the Gateway port (SO_REUSEPORT); each has its own Admin and metrics port, "
        "counting up from the given ones; needs --redis; at most 64",
        _positive_int,
        "N",
    ),
    _Option(
        "reuse_port", "share the Gateway port with other processes (what --workers sets)", _boolean, "{true,false}"
    ),
    _Option(
        "max_concurrent_rpcs",
        "Gateway RPCs served at once (health not counted); beyond it calls are refused with RESOURCE_EXHAUSTED, "
        "not queued",
        _positive_int,
        "N",
    ),
    _Option(
        "max_streams",
        "open ValidateStream calls, below --max-concurrent-rpcs (default: a quarter of it)",
        _positive_int,
        "N",
    ),
    _Option(
        "max_streams_per_peer",
        "open ValidateStream calls from one peer address (default: a quarter of --max-streams)",
        _positive_int,
        "N",
    ),
    _Option(
        "stream_idle_seconds",
        "a ValidateStream with no request for this long is closed",
        parse_duration,
        "DURATION",
    ),
    _Option("shadow_policy", "a shadow policy: judges every call too, never decides (default: none)", str, "FILE"),
    _Option("shadow_max_in_flight", "shadow judgments at once; past it a call is counted busy", _positive_int, "N"),
    _Option("decision_log", "folder for the decision log, one JSON line per verdict (default: none)", str, "DIR"),
    _Option("decision_log_max_bytes", "the decision log's total size on disk", _positive_int, "BYTES"),
    _Option("decision_log_rotate_bytes", "a decision-log file rotates at this size", _positive_int, "BYTES"),
    _Option("decision_log_rotate_seconds", "a decision-log file rotates at this age", parse_duration, "DURATION"),
    _Option(
        "decision_log_queue", "decision-log lines waiting for the writer before lines are dropped", _positive_int, "N"
    ),
    _Option(
        "decision_log_key",
        "file with the key for argument values, 32 bytes or more (default: made on first start in the folder)",
    ),
    _Option(
        "otlp_endpoint",
        "OpenTelemetry collector (OTLP/gRPC) for a span per Validate and Repair; HOST:PORT or http:// in plaintext, "
        "https:// in TLS; needs argwatch[otel] (default: no tracing)",
        parse_otlp_endpoint,
        "HOST:PORT",
    ),
    _Option(
        "otlp_sample_ratio",
        "the fraction of calls without a traceparent that are traced (a caller's sampling decision is followed)",
        _ratio,
        "FRACTION",
    ),
    _Option(
        "decision_log_otlp",
        "also send the decision log's lines to --otlp-endpoint as OTLP log records",
        _boolean,
        "{true,false}",
    ),
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Every setting as a flag, its help naming the environment variable and the default in force."""
    for option in SERVE_OPTIONS:
        parser.add_argument(option.flag, dest=option.name, default=None, metavar=option.metavar, help=_help_of(option))


def _help_of(option: _Option) -> str:
    """`help [env ARGWATCH_X; default: Y]`, Y as Settings has it (help that already says its default keeps it)."""
    if "default" in option.help or option.name == "policy":
        return f"{option.help} [env {option.env}]"
    found = next(f for f in fields(Settings) if f.name == option.name)
    if found.default_factory is not MISSING:  # replica_id: computed per process
        shown = "HOST-PID"
    elif option.parse is parse_duration and isinstance(found.default, float):
        shown = spoken(found.default)
    elif found.default in (None, ""):
        shown = "none"
    elif isinstance(found.default, Mode):
        shown = found.default.value
    else:
        shown = str(found.default).lower() if isinstance(found.default, bool) else str(found.default)
    return f"{option.help} [env {option.env}; default: {shown}]"


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Settings from parsed flags, then the environment; raises ValueError naming the flag and variable."""
    values: dict[str, Any] = {}
    for option in SERVE_OPTIONS:
        raw = getattr(args, option.name, None)
        origin = option.flag
        if raw is None:
            raw, origin = environ.get(option.env), option.env
        if raw is None:
            continue
        try:
            values[option.name] = option.parse(raw)
        except ValueError as error:
            raise ValueError(f"{origin}: {error}") from None
    if "policy" not in values:
        raise ValueError("a policy is required: --policy FILE or ARGWATCH_POLICY")
    return Settings(**values)
