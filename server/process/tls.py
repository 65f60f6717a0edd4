"""TLS and mutual TLS for the Gateway and Admin listeners, from PEM files named in the settings.

One certificate and key serve both listeners; each listener may also require
client certificates signed by its own CA (mTLS): agents on the Gateway, people
and tools on the Admin API. Files are read once at start; an unreadable or
mismatched file stops the start with a message naming the flag.
"""

from __future__ import annotations

import ssl

import grpc

from argwatch.common.files import SMALL_FILE_BYTES, read_file
from argwatch.server.process.settings import Settings


def server_credentials(settings: Settings, *, admin: bool) -> grpc.ServerCredentials | None:
    """Credentials for the Gateway (admin=False) or Admin listener; None when TLS is off."""
    if not settings.tls_cert:
        return None
    client_ca_path = settings.admin_tls_client_ca if admin else settings.tls_client_ca
    key = _read(settings.tls_key, "--tls-key")
    chain = _read(settings.tls_cert, "--tls-cert")
    client_ca = (
        _read(client_ca_path, "--admin-tls-client-ca" if admin else "--tls-client-ca") if client_ca_path else None
    )
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def check_tls_settings(settings: Settings) -> None:
    """Raises ValueError when the TLS flags do not go together."""
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    if (settings.tls_client_ca or settings.admin_tls_client_ca) and not settings.tls_cert:
        raise ValueError("a client CA (mTLS) needs --tls-cert and --tls-key: mTLS is TLS with client certificates")
    for path, flag in (
        (settings.tls_cert, "--tls-cert"),
        (settings.tls_key, "--tls-key"),
        (settings.tls_client_ca, "--tls-client-ca"),
        (settings.admin_tls_client_ca, "--admin-tls-client-ca"),
    ):
        if path:
            _read(path, flag)
    if settings.tls_cert:
        # gRPC would say only "Failed to bind" for a key that is not the certificate's.
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(settings.tls_cert, settings.tls_key)
        except ssl.SSLError as error:
            raise ValueError(
                f"--tls-cert {settings.tls_cert} and --tls-key {settings.tls_key} do not go together: "
                f"{error.reason or error}"
            ) from None


def _read(path: str, flag: str) -> bytes:
    try:
        content = read_file(path, SMALL_FILE_BYTES)
    except OSError as error:
        raise ValueError(f"{flag} {path}: {error.strerror}") from None
    if b"-----BEGIN" not in content:
        raise ValueError(f"{flag} {path}: not a PEM file")
    return content
