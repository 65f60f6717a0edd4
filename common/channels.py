"""The one channel factory: every gRPC channel argwatch opens is built here, so TLS is decided in one place.

Agents' clients (Gateway API), the TUI and scripts (Admin API) and the gateway
itself (owners' ValueSetSource and RecordSource) all open channels through
`aio_channel` or `blocking_channel`. Before there was one, the record client
built its own and forgot the policy's `tls: true`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import grpc

from argwatch.common.files import SMALL_FILE_BYTES, read_file

ChannelOption = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class ChannelSecurity:
    """How a channel is secured: plaintext, TLS (system roots or a CA bundle), or mutual TLS."""

    tls: bool = False  # TLS, verified with the system's roots unless ca_file names a bundle
    ca_file: str = ""  # a CA bundle to verify the server with (implies TLS)
    cert_file: str = ""  # a client certificate and its key, for mutual TLS
    key_file: str = ""
    server_name: str = ""  # the name in the server's certificate, when the target's host differs

    @property
    def secure(self) -> bool:
        return self.tls or bool(self.ca_file)

    def credentials(self) -> grpc.ChannelCredentials | None:
        """The channel credentials, reading the PEM files now; None for plaintext. OSError if a file is unreadable."""
        if not self.secure:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file) if self.ca_file else None,
            private_key=_read(self.key_file) if self.key_file else None,
            certificate_chain=_read(self.cert_file) if self.cert_file else None,
        )


PLAINTEXT = ChannelSecurity()


# For the gateway's channels to owning services. gRPC's own reconnect backoff (1 s, growing by 1.6
# to 120 s) fails every call fast while it waits, whatever the caller's own schedule: an owner restarted
# in a deploy stayed unreachable for up to a second or more after it served again. The gateway paces its
# own reconnects (valuesets/source_follower.py), so the channel's are kept short.
QUICK_RECONNECT_OPTIONS: list[ChannelOption] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def service_config_options() -> list[ChannelOption]:
    """Retries on UNAVAILABLE with backoff, from the published service config.

    Its timeouts are left out: grpc-python fires a service config's timeout early
    (grpc/grpc#34547), so every call carries its own deadline instead.
    """
    config = json.loads(resources.files("argwatch.v1").joinpath("service_config.json").read_text())
    for entry in config["methodConfig"]:
        entry.pop("timeout", None)
    return [("grpc.service_config", json.dumps(config)), ("grpc.enable_retries", 1)]


def aio_channel(
    target: str,
    security: ChannelSecurity = PLAINTEXT,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[ChannelOption] = (),
) -> grpc.aio.Channel:
    """An asyncio channel to `target`; `credentials`, when given, replace those `security` describes."""
    chosen, all_options = _parts(security, credentials, options)
    if chosen is None:
        return grpc.aio.insecure_channel(target, options=all_options)
    return grpc.aio.secure_channel(target, chosen, options=all_options)


def blocking_channel(
    target: str,
    security: ChannelSecurity = PLAINTEXT,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[ChannelOption] = (),
) -> grpc.Channel:
    """The same as aio_channel, for code without an event loop."""
    chosen, all_options = _parts(security, credentials, options)
    if chosen is None:
        return grpc.insecure_channel(target, options=all_options)
    return grpc.secure_channel(target, chosen, options=all_options)


def _parts(
    security: ChannelSecurity, credentials: grpc.ChannelCredentials | None, options: Sequence[ChannelOption]
) -> tuple[grpc.ChannelCredentials | None, list[ChannelOption]]:
    chosen = credentials if credentials is not None else security.credentials()
    all_options = list(options)
    if security.server_name:
        all_options.append(("grpc.ssl_target_name_override", security.server_name))
    return chosen, all_options


def _read(path: str) -> bytes:
    return read_file(path, SMALL_FILE_BYTES)
