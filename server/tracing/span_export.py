"""Spans of the Gateway's calls: kept as one tuple each on the event loop, encoded and sent over OTLP/gRPC by a
thread of their own.

The loop's share of a span is two clock readings, a random id and a deque
append; its attributes are made, and it is encoded (in C, `_otlp.c`, as
otlp_encoding.py defines it) and sent, on the export thread, in batches. The queue is bounded: past `queue` spans
waiting, a span is dropped and counted (`full`); a batch the collector did
not take is dropped and counted (`export_error`), and logged once a minute.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import grpc
from opentelemetry.util.types import AttributeValue

from argwatch.server.tracing import otlp_encoding
from argwatch.server.tracing._otlp import span as encoded_span
from argwatch.server.tracing.trace_context import Parent

log = logging.getLogger("argwatch.tracing")

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BATCH = 512
EXPORT_TIMEOUT_SECONDS = 10.0


class Pending(NamedTuple):
    """One finished span, as the loop leaves it: its attributes are made from `attributes` on the export thread."""

    head: bytes  # otlp_encoding.span_head of its kind
    parent: Parent | None
    trace_id: str  # hex: the caller's, or a new one
    span_id: int
    start_ns: int
    end_ns: int
    attributes: Callable[..., Mapping[str, AttributeValue]]
    of: tuple[Any, ...]  # `attributes`' arguments: immutable values, read on the export thread
    error: str


def new_trace_id() -> str:
    """A new trace's id, in hex: random, never zero (W3C)."""
    return format(random.getrandbits(128) or 1, "032x")


def new_span_id() -> int:
    """A span's id: random, never zero."""
    return random.getrandbits(64) or 1


class SpanExport:
    """The bounded queue and its export thread; `offer` from the loop, `close` once at shutdown."""

    def __init__(
        self,
        channel: grpc.Channel,
        resource: Mapping[str, AttributeValue],
        scope: str,
        *,
        queue: int = 2048,
        delay_seconds: float = 5.0,
    ) -> None:
        # Bytes in and out: the request is encoded already, and the (empty) answer is not read.
        self._export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(EXPORT_METHOD)
        self._channel = channel
        self._resource, self._scope = otlp_encoding.request_head(resource, scope)
        self._queue: collections.deque[Pending] = collections.deque()
        self._limit = queue
        self._delay = delay_seconds
        self._wake = threading.Event()
        self._closing = False
        self.dropped = {"full": 0, "export_error": 0}
        self.sent = 0
        self._warned_at = 0.0
        self._thread = threading.Thread(target=self._run, name="argwatch-span-export", daemon=True)
        self._thread.start()

    def offer(self, span: Pending) -> None:
        """Queues a finished span; drops and counts it when `queue` spans already wait."""
        if len(self._queue) >= self._limit:
            self.dropped["full"] += 1
            return
        self._queue.append(span)
        if len(self._queue) >= BATCH and not self._wake.is_set():
            self._wake.set()

    def close(self, timeout: float = EXPORT_TIMEOUT_SECONDS) -> None:
        """Sends what is queued (within `timeout`), then stops the thread and closes the channel."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)
        self._channel.close()

    def _run(self) -> None:
        while True:
            woken = self._wake.wait(self._delay)
            self._wake.clear()
            # Full batches at once; what is left only once the delay has passed with no full batch, or at close.
            # Sending every span queued after each export instead made the exports ever smaller under load, and
            # each export's own cost was then paid per few spans (docs/performance.md, tracing.py).
            while len(self._queue) >= BATCH:
                self._send([self._queue.popleft() for _ in range(BATCH)])
            if not woken or self._closing:
                while self._queue:
                    self._send([self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))])
            if self._closing:
                return

    def _send(self, batch: list[Pending]) -> None:
        try:
            body = otlp_encoding.export_request(self._resource, self._scope, (_encoded(one) for one in batch))
            self._export(body, timeout=EXPORT_TIMEOUT_SECONDS)
            self.sent += len(batch)
        except Exception as error:  # the collector down or refusing, or a span that cannot be encoded
            self.dropped["export_error"] += len(batch)
            now = time.monotonic()
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning("tracing: %d spans not exported: %s", len(batch), _reason(error))


def _encoded(pending: Pending) -> bytes:
    parent = pending.parent
    return encoded_span(
        pending.head,
        bytes.fromhex(pending.trace_id),
        pending.span_id.to_bytes(8, "big"),
        bytes.fromhex(parent.span_id) if parent is not None else b"",
        parent.trace_state if parent is not None else "",
        pending.start_ns,
        pending.end_ns,
        pending.attributes(*pending.of),
        pending.error,
    )


def _reason(error: Exception) -> str:
    if isinstance(error, grpc.RpcError):
        return f"{error.code().name}: {error.details()}"
    return repr(error)
