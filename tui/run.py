"""`argwatch tui`: its options, and running the app until the on-call quits."""

from __future__ import annotations

import argparse
import asyncio
import os

from argwatch.tui.admin_client import AdminClient, Connection, default_actor

TOKEN_ENV = "ARGWATCH_ADMIN_TOKEN"


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50052", help="the gateway's Admin API, HOST:PORT")
    parser.add_argument("--readonly", action="store_true", help="watch only: hide mode changes and refreshes")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between snapshots (at least 0.2)")
    parser.add_argument(
        "--token-file", default="", help=f"a file holding the Admin bearer token (else ${TOKEN_ENV}, if set)"
    )
    parser.add_argument(
        "--actor", default=default_actor(), help="who you are, for the audit trail when the gateway has no tokens"
    )
    parser.add_argument("--tls-ca", default="", help="CA bundle to verify the gateway with (enables TLS)")
    parser.add_argument("--tls-cert", default="", help="client certificate, for mTLS")
    parser.add_argument("--tls-key", default="", help="client private key, for mTLS")
    parser.add_argument("--tls-server-name", default="", help="the name in the gateway's certificate")


def connection_from(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Connection:
    """The connection the options describe; ValueError names a bad option."""
    environ = dict(os.environ) if environ is None else environ
    if args.interval < 0.2:
        raise ValueError(f"--interval {args.interval:g}: at least 0.2 seconds")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together (mTLS needs both)")
    if args.tls_cert and not args.tls_ca:
        raise ValueError("--tls-cert needs --tls-ca (mTLS is TLS with a client certificate)")
    token = environ.get(TOKEN_ENV, "")
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as error:
            raise ValueError(f"--token-file {args.token_file}: {error.strerror}") from None
    for option in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, option)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{option.replace('_', '-')} {path}: no such file")
    return Connection(
        target=args.target,
        token=token,
        actor=args.actor,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_server_name=args.tls_server_name,
    )


def run_tui(connection: Connection, interval: float, readonly: bool) -> int:
    from argwatch.tui.app import ArgwatchApp  # Textual loads only for this command

    async def main() -> None:
        client = AdminClient(connection)
        try:
            await ArgwatchApp(client, interval=interval, readonly=readonly).run_async()
        finally:
            await client.close()

    asyncio.run(main())
    return 0
