"""The Gateway listener's limits: how many RPCs at once, and the keepalive policy, stated rather than left to defaults.

- How many Gateway RPCs at once, streams apart, is admission.py's business
  (health and reflection are not counted there, but capped in probes.py).
  Here: one HTTP/2 connection carries at most MAX_STREAMS_PER_CONNECTION RPCs
  at once (the client queues the rest on its side), so one connection cannot
  take every place; and gRPC's own cap, `rpc_ceiling`, bounds what the
  listener holds in all, whatever holds it: twice --max-concurrent-rpcs.
- Keepalive: the gateway pings an idle connection every 30 s and drops it when
  no answer comes within 10 s (a vanished agent host does not hold a
  connection); a client may ping every 10 s or more, even with no call open;
  a connection idle for 10 minutes is closed (clients reconnect on their own).
- Messages: gRPC's 4 MiB receive limit, stated; a larger request is refused
  with RESOURCE_EXHAUSTED naming the limit.
"""

from __future__ import annotations

from argwatch.server.process.settings import Settings

MAX_RECEIVE_BYTES = 4 * 1024 * 1024
MAX_STREAMS_PER_CONNECTION = 256


def rpc_ceiling(max_concurrent_rpcs: int) -> int:
    """gRPC's cap on every RPC of the listener: room for the Gateway's own, the probes' (probes.py), and calls
    whose answers wait on clients that stopped reading (~18 KB each), which no handler counts any more."""
    return 2 * max_concurrent_rpcs + 100


def gateway_server_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.so_reuseport", 1 if settings.reuse_port else 0),
        ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
        ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.max_connection_idle_ms", 600_000),
    ]
