"""2,000 connections to the metrics port hold no thread each, and the gateway keeps answering.

The attack: `prometheus_client.start_http_server` started a thread per
connection, so 2,000 concurrent (or half-open) scrape connections held 2,000
threads competing with the event loop, and stalled Validate for 11-20 s.
(Validate's p99 under such a flood is bench/metrics_flood.py's to measure: a
timed assertion would only measure this machine's neighbours.)
"""

from __future__ import annotations

import asyncio
import os
import resource
import threading
import urllib.request
from pathlib import Path

import grpc
import pytest

from argwatch.server.process import metrics_listener
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import SourceServer, gateway_on, policy_text, write_sets_file
from tests.service.helpers import eventually, request, value

FLOOD = 2000


def _room_for(connections: int) -> int:
    """As many connections as the descriptor limit allows (two descriptors each: both ends are here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * connections + 512
    if soft < wanted <= hard or (soft < wanted and hard == resource.RLIM_INFINITY):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    assert soft >= 2 * 200 + 512, f"the descriptor limit ({soft}) is too low for this test"
    return min(connections, (soft - 512) // 2)


async def test_a_flood_of_scrape_connections_holds_no_threads_and_validate_answers(
    tmp_path: Path, source: SourceServer
) -> None:
    """Half the connections send nothing, half a request they never read the answer of: the thread count stays
    where it was, every Validate meanwhile is answered, the excess is refused and counted, and once the flood
    ends a scrape is served."""
    count = _room_for(FLOOD)
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, policy_text(source.target, "sets.yaml"))
    threads_before = threading.active_count()
    writers: list[asyncio.StreamWriter] = []
    try:
        for index in range(count):
            _, writer = await asyncio.open_connection("127.0.0.1", gateway.metrics_port)
            if index % 2:
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # and never read what comes back
            writers.append(writer)
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            for index in range(50):
                answer = await stub.Validate(
                    request("refund_order", {"reason_code": "DAMAGED_ITEM"}, call_id=f"f{index}"), timeout=5
                )
                assert answer.decision == pb.DECISION_ALLOW
        assert threading.active_count() <= threads_before + 1  # at most the one render thread
        busy = value(gateway.registry, "argwatch_metrics_scrapes_refused_total", why="busy")
        assert busy >= count // 2  # the silent half alone is many times the listener's cap
    finally:
        for writer in writers:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for writer in writers), return_exceptions=True)
    try:
        body = await asyncio.to_thread(_scrape, gateway.metrics_port)
        assert "argwatch_decisions_total" in body and "argwatch_metrics_scrapes_refused_total" in body
    finally:
        await gateway.stop(0)


async def test_a_silent_connection_is_dropped_after_the_read_deadline(
    tmp_path: Path, source: SourceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that never sends its request is closed by the gateway, not held."""
    monkeypatch.setattr(metrics_listener, "READ_SECONDS", 0.3)
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, policy_text(source.target, "sets.yaml"))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.metrics_port)
        assert await asyncio.wait_for(reader.read(), 5.0) == b""  # closed by the gateway
        writer.close()
        await writer.wait_closed()
        assert value(gateway.registry, "argwatch_metrics_scrapes_refused_total", why="slow") == 1
    finally:
        await gateway.stop(0)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


async def test_a_scrape_whose_answer_is_never_read_gives_back_its_socket(
    tmp_path: Path, source: SourceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that asks and never reads, with a tiny receive buffer: the answer cannot be handed over within
    WRITE_SECONDS, and the gateway's end of the socket, with the answer it buffered, goes (before, a close waited
    on the client for ever: a socket and the exposition kept per such client)."""
    import socket

    from prometheus_client import Counter

    monkeypatch.setattr(metrics_listener, "WRITE_SECONDS", 0.3)
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, policy_text(source.target, "sets.yaml"))
    padding = Counter("padding", "An exposition of ~1 MB.", ["label"], registry=gateway.registry)
    for index in range(10_000):
        padding.labels(f"value-{index:06d}-{'x' * 60}").inc()
    clients: list[socket.socket] = []
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(4):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            client.setblocking(False)
            await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", gateway.metrics_port))
            client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(client)
        await eventually(lambda: value(gateway.registry, "argwatch_metrics_scrapes_refused_total", why="slow") == 4)
        await eventually(lambda: len(os.listdir("/proc/self/fd")) == before + 4)  # our 4 ends; the gateway's gone
    finally:
        for client in clients:
            client.close()
        await gateway.stop(0)
