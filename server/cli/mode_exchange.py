"""One exchange of `argwatch mode` with the Admin API, and what its errors mean as exit codes."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

if TYPE_CHECKING:  # the server loads the TUI package only when a command that needs it runs
    from argwatch.tui.admin_client import AdminClient, Connection

T = TypeVar("T")

APPLIED = 0  # applied, or nothing to change
REFUSED = 1  # the gateway refused the change (or the request): the reason is printed
NOT_CONFIRMED = 2  # a usage error, or a change not confirmed
UNREACHABLE = 3  # the Admin API did not answer, or did not accept the token
EXIT_CODES = """exit codes:
  0  applied (or nothing to change); for preview, the preview printed
  1  refused by the gateway (the reason is printed: no such tool, the mode store unreachable, ...)
  2  usage error, or the change not confirmed (no terminal to ask on, and no --yes)
  3  the Admin API unreachable, or the token missing, unknown or read-only"""
# The Admin API's own refusals of the caller, not of the change: the change was never weighed.
_CALLER_CODES = {
    grpc.StatusCode.UNAUTHENTICATED: "the gateway did not accept the token (give one with --token-file FILE or "
    "$ARGWATCH_ADMIN_TOKEN)",
    grpc.StatusCode.PERMISSION_DENIED: "the token may only read: changing a mode needs a token with the admin role",
}
_TRANSPORT_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class Failed(Exception):
    """The command stops with this exit code; the message is what to print."""

    def __init__(self, code: int, message: str, status: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status  # the gRPC status behind it, when the gateway answered with one


def connection(args: argparse.Namespace, environ: Mapping[str, str]) -> Connection:
    from argwatch.tui.run import connection_from

    return connection_from(args, dict(environ))


def call(reach: Connection, asked: Callable[[AdminClient], Awaitable[T]]) -> T:
    """One exchange with the Admin API on a fresh channel; its errors as Failed with the exit code they mean."""

    from argwatch.tui.admin_client import AdminClient

    async def exchange() -> T:
        client = AdminClient(reach)
        try:
            return await asked(client)
        finally:
            await client.close()

    try:
        return asyncio.run(exchange())
    except grpc.aio.AioRpcError as error:
        code, details = error.code(), error.details() or ""
        if code in _CALLER_CODES:
            raise Failed(UNREACHABLE, f"{reach.target}: {code.name}: {_CALLER_CODES[code]} ({details})", code) from None
        if code in _TRANSPORT_CODES:
            raise Failed(
                UNREACHABLE, f"{reach.target}: cannot reach the Admin API: {code.name}: {details}", code
            ) from None
        raise Failed(REFUSED, f"refused: {details} ({code.name})", code) from None


def failed(name: str, stopped: Failed) -> int:
    print(f"argwatch mode {name}: {stopped}", file=sys.stderr)
    return stopped.code


def as_json(message: Message) -> dict[str, object]:
    return json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )


def confirm(question: str) -> None:
    """Asks on the terminal; Failed(NOT_CONFIRMED) without one, or without a yes."""
    if not sys.stdin.isatty():
        raise Failed(NOT_CONFIRMED, "not confirmed: no terminal to ask on; give --yes to change without asking")
    print(question, end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise Failed(NOT_CONFIRMED, "not confirmed: nothing changed")
