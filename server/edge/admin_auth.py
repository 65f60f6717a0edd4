"""Who may use the Admin API: bearer tokens with a role (read: look; admin: also change modes).

Tokens come from a YAML file (`--admin-tokens`), one entry per person or system:

    - {name: ana@oncall, role: admin, token: "..."}
    - {name: grafana, role: read, token: "..."}

Every Admin call must carry `authorization: Bearer <token>`: none or an unknown
one is UNAUTHENTICATED, a read token on a changing method PERMISSION_DENIED;
every refusal is counted, and a refused mode change is also written to the
mode audit. Server reflection stays open (it describes the API, nothing more).
Without a tokens file the Admin API is open, which the gateway allows only on a
loopback listener.
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import yaml

from argwatch.common.files import SMALL_FILE_BYTES, read_file

log = logging.getLogger("argwatch.admin")

# Methods that change something: the admin role only.
_SHADOW_METHODS = {
    "/argwatch.v1.Admin/SetShadowPolicy",
    "/argwatch.v1.Admin/ClearShadowPolicy",
    "/argwatch.v1.Admin/PromoteShadow",
}
ADMIN_METHODS = frozenset(
    {"/argwatch.v1.Admin/SetMode", "/argwatch.v1.Admin/RefreshValueSet", "/argwatch.v1.Admin/ReloadPolicy"}
    | _SHADOW_METHODS
)
# Changes audited when refused to a caller the tokens name (a read-only token trying them).
MODE_METHODS = frozenset({"/argwatch.v1.Admin/SetMode", "/argwatch.v1.Admin/ReloadPolicy"} | _SHADOW_METHODS)
OPEN_PREFIXES = ("/grpc.reflection.", "/grpc.health.")
ROLES = ("read", "admin")


@dataclass(frozen=True, slots=True)
class Caller:
    name: str
    role: str


class TokenBook:
    """Tokens to callers; comparisons in constant time."""

    def __init__(self, entries: Mapping[str, Caller]) -> None:
        self._entries = dict(entries)

    def caller(self, metadata: Any) -> Caller | None:
        token = bearer(metadata)
        if token is None:
            return None
        for known, caller in self._entries.items():
            if hmac.compare_digest(known, token):
                return caller
        return None


def bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer ") :].strip() or None
    return None


def load_tokens(path: str, *, allow_readable: bool = False) -> TokenBook:
    """Reads the tokens file; raises ValueError naming the entry that is wrong, or, unless `allow_readable`,
    saying that its group or others may read it (anyone who can read it can change modes)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise ValueError(f"{path}: cannot read the Admin tokens: {error.strerror}") from None
    if mode & 0o077 and not allow_readable:
        raise ValueError(
            f"{path}: the Admin tokens file is readable by others (mode {stat.S_IMODE(mode):04o}): "
            f"chmod 600 it, or start with --allow-readable-tokens true"
        )
    try:
        document = yaml.safe_load(read_file(path, SMALL_FILE_BYTES))
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"{path}: cannot read the Admin tokens: {error}") from None
    if not isinstance(document, list) or not document:
        raise ValueError(f"{path}: expected a list of {{name, role, token}}")
    entries: dict[str, Caller] = {}
    for index, entry in enumerate(document):
        where = f"{path}[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "role", "token"}:
            raise ValueError(f"{where}: expected exactly name, role and token")
        if entry["role"] not in ROLES:
            raise ValueError(f"{where}.role: expected read or admin, got {entry['role']!r}")
        token = str(entry["token"])
        if len(token) < 16:
            raise ValueError(f"{where}.token: at least 16 characters")
        entries[token] = Caller(str(entry["name"]), entry["role"])
    return TokenBook(entries)


class AdminAuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses Admin calls without a valid token, or with too small a role."""

    def __init__(
        self, book: TokenBook, on_refused: Callable[[str, str, Any], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._book = book
        self._on_refused = on_refused
        self._clock = clock
        self._next_log = 0.0
        self._unlogged = 0

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]], handler_call_details: Any) -> Any:
        method = handler_call_details.method
        if method.startswith(OPEN_PREFIXES):
            return await continuation(handler_call_details)
        caller = self._book.caller(handler_call_details.invocation_metadata)
        if caller is None:
            return self._refuse(
                method,
                "unauthenticated",
                handler_call_details.invocation_metadata,
                grpc.StatusCode.UNAUTHENTICATED,
                "an Admin token is required (authorization: Bearer ...)",
            )
        if method in ADMIN_METHODS and caller.role != "admin":
            return self._refuse(
                method,
                f"permission_denied:{caller.name}",
                handler_call_details.invocation_metadata,
                grpc.StatusCode.PERMISSION_DENIED,
                f"{caller.name} may look, not change (role read)",
            )
        return await continuation(handler_call_details)

    def _refuse(self, method: str, reason: str, metadata: Any, code: grpc.StatusCode, details: str) -> Any:
        # Logged at most once a second (with how many were not): a flood must not flood the log too.
        now = self._clock()
        if now >= self._next_log:
            more = f" (and {self._unlogged} more refused since the last line)" if self._unlogged else ""
            log.warning("admin call refused: %s %s%s", method, reason, more)
            self._next_log, self._unlogged = now + 1.0, 0
        else:
            self._unlogged += 1
        self._on_refused(method, reason, metadata)

        async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            await context.abort(code, details)

        return grpc.unary_unary_rpc_method_handler(refuse)
