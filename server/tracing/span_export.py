"""Spans of the Gateway's calls: encoded on the event loop, one native call each, and sent over OTLP/gRPC in
batches by a thread of their own.

The loop's share of a span is two clock readings, a random id, its encoding
(in C, `_otlp.c`, as otlp_encoding.py defines it) and a deque append: a span
waits as bytes, which the garbage collector never visits. The export thread
joins a batch into a request (in C too) and sends it. The queue is bounded:
past `queue` spans waiting, a span is dropped and counted (`full`); a batch the
collector did not take is dropped and counted (`export_error`), and logged once
a minute; a span that could not be encoded is dropped and counted
(`unencodable`), and the call is answered all the same. (No caller can send
one: gRPC refuses a string that is not UTF-8 before the handler runs. The count
is there so that a defect of ours shows rather than failing decided calls.)
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Mapping

import grpc
from opentelemetry.util.types import AttributeValue

from argwatch.server.tracing import otlp_encoding
from argwatch.server.tracing._otlp import export_request
from argwatch.server.tracing._otlp import span as native_span
from argwatch.server.tracing.trace_context import Parent

log = logging.getLogger("argwatch.tracing")

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BATCH = 512
EXPORT_TIMEOUT_SECONDS = 10.0


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
        self._queue: collections.deque[bytes] = collections.deque()
        self._limit = queue
        self._delay = delay_seconds
        self._wake = threading.Event()
        self._closing = False
        self.dropped = {"full": 0, "export_error": 0, "unencodable": 0}
        self.sent = 0
        self._warned_at = 0.0
        self._thread = threading.Thread(target=self._run, name="argwatch-span-export", daemon=True)
        self._thread.start()

    def has_room(self) -> bool:
        """Whether `offer` would queue a span now; when not, counts the span as dropped (`full`), so that the
        loop need not encode it."""
        if len(self._queue) < self._limit:
            return True
        self.dropped["full"] += 1
        return False

    def offer(self, span: bytes) -> None:
        """Queues a finished, encoded span, once `has_room` said there is room: the bound is checked there, once,
        and holds because only the loop appends (the export thread only takes)."""
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

    def unencodable(self) -> None:
        """Counts a span that could not be encoded (`_otlp` raised): dropped."""
        self.dropped["unencodable"] += 1

    def _send(self, batch: list[bytes]) -> None:
        try:
            body = export_request(self._resource, self._scope, batch)
            self._export(body, timeout=EXPORT_TIMEOUT_SECONDS)
            self.sent += len(batch)
        except Exception as error:  # the collector down or refusing
            self.dropped["export_error"] += len(batch)
            now = time.monotonic()
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning("tracing: %d spans not exported: %s", len(batch), _reason(error))


def encoded_span(
    head: bytes,
    parent: Parent | None,
    trace_id: str,
    span_id: int,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, AttributeValue],
    error: str,
) -> bytes:
    """A span with any attributes (otlp_encoding.span, in C): for what is not a judged call, which
    `_otlp.verdict_span` encodes from its fields."""
    return native_span(
        head,
        bytes.fromhex(trace_id),
        span_id.to_bytes(8, "big"),
        bytes.fromhex(parent.span_id) if parent is not None else b"",
        parent.trace_state if parent is not None else "",
        start_ns,
        end_ns,
        attributes,
        error,
    )


def _reason(error: Exception) -> str:
    if isinstance(error, grpc.RpcError):
        return f"{error.code().name}: {error.details()}"
    return repr(error)
