"""The TUI's only door to the gateway: a thin client of the Admin API (token, actor and TLS included)."""

from __future__ import annotations

import getpass
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import grpc

from argwatch.common.channels import ChannelSecurity, aio_channel
from argwatch.common.status_pages import join_pages
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2

# Setting or promoting a shadow loads a policy and its sets (up to 5 s for sets not loaded yet), or swaps the live one.
SHADOW_LOAD_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Connection:
    """How to reach an Admin API: address, optional bearer token, who we are, and TLS files."""

    target: str
    token: str = ""
    actor: str = ""  # sent as x-argwatch-actor when the gateway has no tokens (its audit's "who")
    tls_ca: str = ""  # a CA bundle to verify the gateway with; enables TLS
    tls_cert: str = ""  # a client certificate and key, for mTLS
    tls_key: str = ""
    tls_server_name: str = ""  # the name in the gateway's certificate, when the target's host differs

    @property
    def security(self) -> ChannelSecurity:
        return ChannelSecurity(
            ca_file=self.tls_ca, cert_file=self.tls_cert, key_file=self.tls_key, server_name=self.tls_server_name
        )


def default_actor() -> str:
    """user@host: what the audit trail says when the gateway has no tokens to name us by."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class AdminApi(Protocol):
    """What the TUI asks of a gateway."""

    target: str

    def watch(
        self, interval: float, selection: admin_pb2.StatusSelection | None = None
    ) -> AsyncIterator[admin_pb2.GetStatusResponse]: ...

    async def set_mode(
        self, tool: str, mode: gateway_pb2.Mode, reason: str, expires_in_seconds: int
    ) -> admin_pb2.ModeChange: ...

    async def change_override(self, request: admin_pb2.SetModeRequest) -> admin_pb2.SetModeResponse: ...

    async def preview(self, change: admin_pb2.SetModeRequest) -> admin_pb2.PreviewChangeResponse: ...

    async def mode_changes(self, limit: int = 100) -> list[admin_pb2.ModeChange]: ...

    async def samples(self, tool: str, argument: str, limit: int = 10) -> admin_pb2.ListSamplesResponse: ...

    async def cohorts(self, tool: str, argument: str) -> list[admin_pb2.CohortFigures]: ...

    async def shape_report(self, window_seconds: int) -> admin_pb2.GetShapeReportResponse: ...

    async def refresh(self, value_set: str) -> admin_pb2.RefreshValueSetResponse: ...

    async def events(self, limit: int = 200) -> list[admin_pb2.Event]: ...

    async def coverage(self) -> admin_pb2.GetCoverageResponse: ...

    async def shadow_report(self) -> admin_pb2.GetShadowReportResponse: ...

    async def close(self) -> None: ...


MAX_PAGES = 64  # of one snapshot: 192 MiB of status, far past any policy the docs allow


class AdminClient:
    """The Admin API over gRPC."""

    def __init__(self, target: str | Connection, timeout: float = 2.0) -> None:
        connection = target if isinstance(target, Connection) else Connection(target)
        self.target = connection.target
        self._channel = aio_channel(connection.target, connection.security)
        self._stub = admin_pb2_grpc.AdminStub(self._channel)
        self._timeout = timeout
        metadata = []
        if connection.token:
            metadata.append(("authorization", f"Bearer {connection.token}"))
        if connection.actor:
            metadata.append(("x-argwatch-actor", connection.actor))
        self._metadata = tuple(metadata)

    async def status(self) -> admin_pb2.GetStatusResponse:
        """One snapshot, its pages fetched and joined (a large policy's status is more than one message).
        A snapshot let go between two pages (NOT_FOUND) is asked for again, once, from its first page."""
        for attempt in (1, 2):
            pages: list[admin_pb2.GetStatusResponse] = []
            token = ""
            try:
                while True:
                    page: admin_pb2.GetStatusResponse = await self._stub.GetStatus(
                        admin_pb2.GetStatusRequest(page_token=token), timeout=self._timeout, metadata=self._metadata
                    )
                    pages.append(page)
                    token = page.next_page_token
                    if not token:
                        return join_pages(pages)
                    if len(pages) >= MAX_PAGES:
                        raise ValueError(f"the gateway's status has more than {MAX_PAGES} pages")
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND or not token or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def watch(
        self, interval: float, selection: admin_pb2.StatusSelection | None = None
    ) -> AsyncIterator[admin_pb2.GetStatusResponse]:
        """Snapshots every `interval` seconds (each joined from its pages), of the tools `selection` picks (every
        tool without one), until the stream breaks (grpc.aio.AioRpcError) or is closed."""
        call = self._stub.WatchStatus(
            admin_pb2.WatchStatusRequest(interval_seconds=interval, selection=selection), metadata=self._metadata
        )
        pages: list[admin_pb2.GetStatusResponse] = []
        try:
            async for page in call:
                if page.page <= 1:
                    pages = []  # a new snapshot (a gateway before pages sends 0: every message is whole)
                pages.append(page)
                if page.page >= page.pages:
                    yield join_pages(pages) if len(pages) > 1 else page
                    pages = []
        finally:
            call.cancel()

    async def set_mode(
        self, tool: str, mode: gateway_pb2.Mode, reason: str, expires_in_seconds: int
    ) -> admin_pb2.ModeChange:
        response: admin_pb2.SetModeResponse = await self._stub.SetMode(
            admin_pb2.SetModeRequest(tool=tool, mode=mode, reason=reason, expires_in_seconds=expires_in_seconds),
            timeout=self._timeout,
            metadata=self._metadata,
        )
        return response.change

    async def change_override(self, request: admin_pb2.SetModeRequest) -> admin_pb2.SetModeResponse:
        """Any SetMode: one check of a tool (request.check), or a failure override (request.failure). The whole
        answer: the audit entry, and a durability warning when Redis's replicas did not confirm the change."""
        response: admin_pb2.SetModeResponse = await self._stub.SetMode(
            request, timeout=self._timeout, metadata=self._metadata
        )
        return response

    async def preview(self, change: admin_pb2.SetModeRequest) -> admin_pb2.PreviewChangeResponse:
        """What `change` would have done over the last 1 and 15 minutes; changes nothing (the read role may ask)."""
        response: admin_pb2.PreviewChangeResponse = await self._stub.PreviewChange(
            admin_pb2.PreviewChangeRequest(change=change), timeout=self._timeout, metadata=self._metadata
        )
        return response

    async def mode_changes(self, limit: int = 100) -> list[admin_pb2.ModeChange]:
        response: admin_pb2.ListModeChangesResponse = await self._stub.ListModeChanges(
            admin_pb2.ListModeChangesRequest(limit=limit), timeout=self._timeout, metadata=self._metadata
        )
        return list(response.changes)

    async def samples(self, tool: str, argument: str, limit: int = 10) -> admin_pb2.ListSamplesResponse:
        response: admin_pb2.ListSamplesResponse = await self._stub.ListSamples(
            admin_pb2.ListSamplesRequest(tool=tool, argument=argument, limit=limit),
            timeout=self._timeout,
            metadata=self._metadata,
        )
        return response

    async def cohorts(self, tool: str, argument: str) -> list[admin_pb2.CohortFigures]:
        response: admin_pb2.GetCohortsResponse = await self._stub.GetCohorts(
            admin_pb2.GetCohortsRequest(tool=tool, argument=argument), timeout=self._timeout, metadata=self._metadata
        )
        return list(response.cohorts)

    async def shape_report(self, window_seconds: int) -> admin_pb2.GetShapeReportResponse:
        response: admin_pb2.GetShapeReportResponse = await self._stub.GetShapeReport(
            admin_pb2.GetShapeReportRequest(window_seconds=window_seconds),
            timeout=self._timeout,
            metadata=self._metadata,
        )
        return response

    async def refresh(self, value_set: str) -> admin_pb2.RefreshValueSetResponse:
        response: admin_pb2.RefreshValueSetResponse = await self._stub.RefreshValueSet(
            admin_pb2.RefreshValueSetRequest(name=value_set), timeout=self._timeout * 5, metadata=self._metadata
        )
        return response

    async def events(self, limit: int = 200) -> list[admin_pb2.Event]:
        response: admin_pb2.ListEventsResponse = await self._stub.ListEvents(
            admin_pb2.ListEventsRequest(limit=limit), timeout=self._timeout, metadata=self._metadata
        )
        return list(response.events)

    async def coverage(self) -> admin_pb2.GetCoverageResponse:
        response: admin_pb2.GetCoverageResponse = await self._stub.GetCoverage(
            admin_pb2.GetCoverageRequest(), timeout=self._timeout, metadata=self._metadata
        )
        return response

    async def set_shadow(self, policy_yaml: bytes, name: str, reason: str) -> admin_pb2.SetShadowPolicyResponse:
        """Makes the policy the shadow (admin role); a policy that does not load is FAILED_PRECONDITION."""
        response: admin_pb2.SetShadowPolicyResponse = await self._stub.SetShadowPolicy(
            admin_pb2.SetShadowPolicyRequest(policy_yaml=policy_yaml, name=name, reason=reason),
            timeout=max(self._timeout, SHADOW_LOAD_SECONDS),
            metadata=self._metadata,
        )
        return response

    async def clear_shadow(self, reason: str) -> admin_pb2.ClearShadowPolicyResponse:
        response: admin_pb2.ClearShadowPolicyResponse = await self._stub.ClearShadowPolicy(
            admin_pb2.ClearShadowPolicyRequest(reason=reason), timeout=self._timeout, metadata=self._metadata
        )
        return response

    async def shadow_report(self) -> admin_pb2.GetShadowReportResponse:
        response: admin_pb2.GetShadowReportResponse = await self._stub.GetShadowReport(
            admin_pb2.GetShadowReportRequest(), timeout=self._timeout, metadata=self._metadata
        )
        return response

    async def promote_shadow(self, reason: str, shadow_version: str) -> admin_pb2.PromoteShadowResponse:
        """Serves the shadow as the live policy, if it is still `shadow_version` (admin role)."""
        response: admin_pb2.PromoteShadowResponse = await self._stub.PromoteShadow(
            admin_pb2.PromoteShadowRequest(reason=reason, shadow_version=shadow_version),
            timeout=max(self._timeout, SHADOW_LOAD_SECONDS),
            metadata=self._metadata,
        )
        return response

    async def close(self) -> None:
        await self._channel.close()
