"""The TUI's only door to the gateway: a thin client of the Admin API."""

from __future__ import annotations

import grpc

from argwatch.v1 import admin_pb2, admin_pb2_grpc


class AdminClient:
    """Reads the gateway's status over the Admin API."""

    def __init__(self, target: str, timeout: float = 2.0) -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = admin_pb2_grpc.AdminStub(self._channel)
        self._timeout = timeout

    async def status(self) -> admin_pb2.GetStatusResponse:
        response: admin_pb2.GetStatusResponse = await self._stub.GetStatus(
            admin_pb2.GetStatusRequest(), timeout=self._timeout
        )
        return response

    async def shape_report(self, window_seconds: int) -> admin_pb2.GetShapeReportResponse:
        response: admin_pb2.GetShapeReportResponse = await self._stub.GetShapeReport(
            admin_pb2.GetShapeReportRequest(window_seconds=window_seconds), timeout=self._timeout
        )
        return response

    async def close(self) -> None:
        await self._channel.close()
