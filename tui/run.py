"""The options every Admin API command shares (tui, watch, report), and running the TUI until the on-call quits."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from argwatch.common.durations import duration
from argwatch.common.files import SMALL_FILE_BYTES, read_file
from argwatch.common.tls_flags import add_tls_arguments, security_from
from argwatch.tui.admin_client import AdminClient, Connection, default_actor

TOKEN_ENV = "ARGWATCH_ADMIN_TOKEN"
DEFAULT_ADMIN = "127.0.0.1:50052"
TUI_EXTRA_HINT = "argwatch tui needs the TUI's extra: pip install 'argwatch[tui]'"


def add_admin_arguments(parser: argparse.ArgumentParser, *, actor: bool = False) -> None:
    """--admin, the token and the TLS files: the same flags on every command that reads the Admin API."""
    group = parser.add_argument_group("the Admin API")
    group.add_argument("--admin", default=DEFAULT_ADMIN, metavar="HOST:PORT", help="the Admin API's address")
    # --target: the name `argwatch tui` used before every command spoke of --admin; still accepted, not shown.
    group.add_argument("--target", dest="admin", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    group.add_argument(
        "--token-file", default="", metavar="FILE", help=f"a file holding the Admin bearer token (else ${TOKEN_ENV})"
    )
    if actor:
        group.add_argument(
            "--actor", default=default_actor(), help="who you are, in the audit trail when the gateway has no tokens"
        )
    add_tls_arguments(group)


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    add_admin_arguments(parser, actor=True)
    parser.add_argument("--readonly", action="store_true", help="watch only: hide mode changes and refreshes")
    parser.add_argument(
        "--interval", type=duration, default=1.0, metavar="DURATION", help="time between snapshots, at least 0.2s"
    )


def connection_from(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Connection:
    """The connection the options describe; ValueError names a bad option."""
    environ = dict(os.environ) if environ is None else environ
    if getattr(args, "interval", 1.0) < 0.2:
        raise ValueError(f"--interval {args.interval:g}s: at least 0.2 seconds")
    security = security_from(args)
    token = environ.get(TOKEN_ENV, "")
    if args.token_file:
        try:
            token = read_file(args.token_file, SMALL_FILE_BYTES).decode("utf-8", "replace").strip()
        except OSError as error:
            raise ValueError(f"--token-file {args.token_file}: {error.strerror}") from None
    return Connection(
        target=args.admin,
        token=token,
        actor=getattr(args, "actor", ""),
        tls_ca=security.ca_file,
        tls_cert=security.cert_file,
        tls_key=security.key_file,
        tls_server_name=security.server_name,
    )


def tui_installed() -> bool:
    """Whether the TUI's extra (Textual) is installed."""
    try:
        import textual  # noqa: F401
    except ImportError:
        return False
    return True


def run_tui(connection: Connection, interval: float, readonly: bool) -> int:
    try:
        from argwatch.tui.app import ArgwatchApp  # Textual loads only for this command
    except ImportError as error:
        if (error.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        print(f"{TUI_EXTRA_HINT} ({error.name} is not installed)", file=sys.stderr)
        return 1

    async def main() -> None:
        client = AdminClient(connection)
        try:
            await ArgwatchApp(client, interval=interval, readonly=readonly).run_async()
        finally:
            await client.close()

    asyncio.run(main())
    return 0
