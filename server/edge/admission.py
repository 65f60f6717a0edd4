"""Which Gateway RPCs may start: a cap on all of them, a lower one on streams and on each peer's streams.

gRPC's own `maximum_concurrent_rpcs` counts every RPC on the server alike,
health checks included. A caller with no credential once opened streams that
never sent until that cap was reached: from then on every other caller's
Validate, and the Kubernetes probes' health check, got RESOURCE_EXHAUSTED.
So the cap lives here, on the Gateway service's methods only:

- all Gateway RPCs together: at most `max_rpcs`;
- streams: at most `max_streams`, which is below `max_rpcs`, so unary calls
  always keep `max_rpcs - max_streams` places; and at most
  `max_streams_per_peer` from one peer address;
- health and reflection are not counted at all: no caller's load refuses them.

A refusal is RESOURCE_EXHAUSTED at once, naming the limit, and counted
(`argwatch_rpcs_shed_total{limit}`). How long a stream may sit without a
request is the stream handler's business (gateway_service.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps, as the settings give them (checked there: max_streams < max_rpcs, per peer <= max_streams)."""

    max_rpcs: int
    max_streams: int
    max_streams_per_peer: int


class Admission:
    """Counts the Gateway RPCs in flight and says whether another may start (single event loop: no locks)."""

    def __init__(self, limits: Limits, on_shed: Callable[[str], None], on_streams: Callable[[int], None]) -> None:
        self.limits = limits
        self._on_shed = on_shed  # the limit's name: rpcs, streams or streams_per_peer
        self._on_streams = on_streams  # streams open now, for the gauge
        self._unary = 0
        self._streams = 0
        self._by_peer = PeerCounts()

    @property
    def in_flight(self) -> int:
        return self._unary + self._streams

    @property
    def streams(self) -> int:
        return self._streams

    def enter_unary(self) -> str:
        """ "" when a unary call may start (then call leave_unary); otherwise why not."""
        if self._unary + self._streams >= self.limits.max_rpcs:
            self._on_shed("rpcs")
            return f"the gateway is serving {self.limits.max_rpcs} calls at once (--max-concurrent-rpcs); retry shortly"
        self._unary += 1
        return ""

    def leave_unary(self) -> None:
        self._unary -= 1

    def enter_stream(self, peer: str) -> str:
        """ "" when a stream from `peer` may open (then call leave_stream); otherwise why not."""
        limits = self.limits
        if self._streams >= limits.max_streams:
            self._on_shed("streams")
            return (
                f"the gateway holds {limits.max_streams} open streams (--max-streams); use Validate, or retry shortly"
            )
        if self._by_peer[peer] >= limits.max_streams_per_peer:
            self._on_shed("streams_per_peer")
            return (
                f"your address holds {limits.max_streams_per_peer} open streams (--max-streams-per-peer); "
                "send more calls on the streams you have"
            )
        if self._unary + self._streams >= limits.max_rpcs:
            self._on_shed("rpcs")
            return f"the gateway is serving {limits.max_rpcs} calls at once (--max-concurrent-rpcs); retry shortly"
        self._streams += 1
        self._by_peer.take(peer)
        self._on_streams(self._streams)
        return ""

    def leave_stream(self, peer: str) -> None:
        self._streams -= 1
        self._by_peer.give_back(peer)
        self._on_streams(self._streams)


class PeerCounts:
    """How many of something each peer holds now; a peer holding none is not remembered (so the table is
    bounded by what is held, whatever addresses come and go)."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}

    def __getitem__(self, peer: str) -> int:
        return self._held.get(peer, 0)

    def __len__(self) -> int:
        return len(self._held)

    def take(self, peer: str) -> None:
        self._held[peer] = self._held.get(peer, 0) + 1

    def give_back(self, peer: str) -> None:
        held = self._held[peer] - 1
        if held:
            self._held[peer] = held
        else:
            del self._held[peer]


def peer_host(peer: str) -> str:
    """The address part of gRPC's peer string ("ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7"): one host, any port."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rpartition(":")[0]
    return peer  # unix sockets and the like: the whole string
