"""Serves Prometheus' /metrics from the event loop, with bounded connections and deadlines, rendered on one thread.

`prometheus_client.start_http_server` starts a thread per connection: 2,000
concurrent scrape connections (half-open ones included) held 2,000 threads,
all competing with the event loop, and stalled Validate for 11-20 s. Here:

- connections are accepted on the event loop; past MAX_CONNECTIONS at once,
  or MAX_PER_PEER from one address (so that no one client can keep the
  scraper out), a new one gets 503 and is closed at once (counted);
- a client has READ_SECONDS to send its request head (at most HEAD_BYTES),
  and WRITE_SECONDS to take the answer: a slow or silent one is dropped, its
  socket aborted (a close would wait for a client that reads nothing, and
  keep the socket and its buffered answer);
- the exposition is rendered (and gzipped, when asked) on one worker thread,
  never on the loop, and scrapes that arrive while a render of the same format
  runs share it: the thread count stays flat whatever the load.

Only GET and HEAD of `/metrics` (and `/`, as the library served) are answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from argwatch.server.edge.admission import PeerCounts

log = logging.getLogger("argwatch.metrics")

MAX_CONNECTIONS = 64
MAX_PER_PEER = 16
HEAD_BYTES = 8192
READ_SECONDS = 5.0
WRITE_SECONDS = 10.0
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 25\r\nConnection: close\r\n\r\ntoo many scrapes at once\n"


class MetricsListener:
    """The /metrics endpoint of one gateway process."""

    def __init__(self, registry: CollectorRegistry, on_refused: Callable[[str], None]) -> None:
        self._registry = registry
        self._on_refused = on_refused  # why: busy, slow, bad_request
        self._open = 0
        self._by_peer = PeerCounts()
        self._server: asyncio.Server | None = None
        # One thread renders: a render holds the GIL either way, and more threads only compete with the loop.
        self._renderer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="argwatch-metrics")
        self._rendering: dict[tuple[str, bool], asyncio.Future[tuple[bytes, str]]] = {}
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listens on host:port (port 0: a free one); returns the port. OSError when it cannot."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=HEAD_BYTES, backlog=1024)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._renderer.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer)
        if self._open >= MAX_CONNECTIONS or self._by_peer[peer] >= MAX_PER_PEER:
            self._on_refused("busy")
            writer.write(_BUSY)  # not awaited: a client that reads nothing must not hold even this
            writer.transport.abort()
            return
        self._open += 1
        self._by_peer.take(peer)
        done = False
        try:
            await self._answer_one(reader, writer)
            done = True
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            self._on_refused("slow")
        except Exception:  # one bad scrape must not take the listener down
            log.exception("serving /metrics failed")
        finally:
            self._open -= 1
            self._by_peer.give_back(peer)
            if done and not writer.transport.get_write_buffer_size():
                writer.close()  # all of it handed to the kernel: a normal close
            else:
                writer.transport.abort()  # nothing more waits on this client

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_SECONDS)
        except (asyncio.LimitOverrunError, ValueError):
            self._on_refused("bad_request")
            await _answer(writer, 431, b"request head too large\n", "text/plain", head_only=False)
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, _, rest = request_line.partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        if method not in ("GET", "HEAD"):
            self._on_refused("bad_request")
            await _answer(writer, 405, b"GET /metrics\n", "text/plain", head_only=False)
            return
        if path not in ("/metrics", "/"):
            await _answer(writer, 404, b"not found: the metrics are at /metrics\n", "text/plain", head_only=False)
            return
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        gzipped = gzip_accepted(headers.get("accept-encoding", ""))
        body, content_type = await self._render(headers.get("accept", ""), gzipped)
        await _answer(writer, 200, body, content_type, head_only=method == "HEAD", gzipped=gzipped)

    async def _render(self, accept: str, gzipped: bool) -> tuple[bytes, str]:
        """The exposition in the format `accept` asks for; scrapes arriving during a render share it."""
        encoder, content_type = choose_encoder(accept)
        key = (content_type, gzipped)
        running = self._rendering.get(key)
        if running is None:
            loop = asyncio.get_running_loop()

            def render() -> tuple[bytes, str]:
                output = encoder(self._registry)
                return (gzip.compress(output, compresslevel=1) if gzipped else output), content_type

            running = self._rendering[key] = asyncio.ensure_future(loop.run_in_executor(self._renderer, render))
            running.add_done_callback(lambda _: self._rendering.pop(key, None))
        return await asyncio.shield(running)


def _peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return str(address[0]) if isinstance(address, tuple) and address else str(address)


async def _answer(
    writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str, *, head_only: bool, gzipped: bool = False
) -> None:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}.get(
        status, "Service Unavailable"
    )
    lines = [
        f"HTTP/1.1 {status} {reason}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if gzipped:
        lines.append("Content-Encoding: gzip")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body))
    await asyncio.wait_for(writer.drain(), WRITE_SECONDS)
