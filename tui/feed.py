"""The TUI's stream of status snapshots, which says when the gateway is lost and reconnects by itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import NamedTuple

import grpc

from argwatch.common.backoff import backoff_delay
from argwatch.tui.admin_client import AdminApi
from argwatch.v1 import admin_pb2

RETRY_FIRST_SECONDS = 0.5
RETRY_CAP_SECONDS = 5.0


class Snapshot(NamedTuple):
    status: admin_pb2.GetStatusResponse


class Lost(NamedTuple):
    """The stream broke or could not start; `reason` says why (a gRPC status and its details)."""

    reason: str
    retry_in: float


FeedEvent = Snapshot | Lost


async def follow(
    api: AdminApi, interval: float, selection: admin_pb2.StatusSelection | None = None
) -> AsyncIterator[FeedEvent]:
    """Snapshots while the gateway answers; a Lost when it stops, then retries with the shared jittered
    backoff (ceilings 0.5 s doubling to 5 s, so several screens do not return in step) until it answers
    again. Runs until cancelled."""
    attempt = 0
    while True:
        try:
            async for status in api.watch(interval, selection):
                attempt = 0
                yield Snapshot(status)
            reason = "the gateway ended the status stream"
        except grpc.aio.AioRpcError as error:
            reason = f"{error.code().name}: {error.details()}"
        attempt += 1
        delay = backoff_delay(attempt, base=RETRY_FIRST_SECONDS, cap=RETRY_CAP_SECONDS)
        yield Lost(reason, delay)
        await asyncio.sleep(delay)
