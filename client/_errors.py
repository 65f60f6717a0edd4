"""The one exception tree argwatch.client and its gates raise, and the single place gRPC errors are mapped into it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc


class ArgwatchError(Exception):
    """The base of every error that argwatch.client, its adapters and its gates raise."""


class GatewayError(ArgwatchError, RuntimeError):
    """A call to the gateway ended without an answer. The gRPC error is the cause (`__cause__`).

    The message names the gRPC status, never an address, so a framework may hand it to the model.
    A RuntimeError too, as the gates' GatewayUnavailable always was.

    Attributes:
        code: The gRPC status code's name ("UNAVAILABLE", "DEADLINE_EXCEEDED", "NOT_FOUND", ...).
        details: The gRPC status details: for logs and people, as they may name the gateway's address.
    """

    def __init__(self, message: str, code: str, details: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class GatewayUnavailable(GatewayError):
    """The gateway gave no verdict: unreachable, past the deadline, overloaded or failing. The tool call was not run."""


class GatewayRejectedRequest(GatewayError):
    """The gateway refused the request itself: a field past its length limit (INVALID_ARGUMENT), a call it
    does not know where it was named (NOT_FOUND), credentials it does not accept. Retrying it as it is fails again.

    A rejected tool call is not this: it is a verdict (`Outcome.go_ahead` is False).
    """


class InvalidInput(ArgwatchError, ValueError):
    """What was passed cannot be sent: a tool call an adapter cannot read, an outcome other than the three.
    A ValueError too, as these always were."""


# Statuses that say the request itself was refused; every other one means no verdict was reached.
_REJECTED = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)


@contextmanager
def gateway_errors(what: str) -> Iterator[None]:
    """Raises a grpc.RpcError from inside as GatewayUnavailable or GatewayRejectedRequest, `what` in the message."""
    try:
        yield
    except grpc.RpcError as error:
        # The blocking stack's errors are grpc.Call; asyncio's AioRpcError has the same methods, but is not one.
        answered = isinstance(error, grpc.Call | grpc.aio.AioRpcError)
        code = error.code() if answered else None
        details = (error.details() or "") if answered else ""
        name = code.name if code is not None else "UNKNOWN"
        if code in _REJECTED:
            raise GatewayRejectedRequest(
                f"argwatch: the gateway refused the request ({name}); {what}", name, details
            ) from error
        raise GatewayUnavailable(f"argwatch: no verdict from the gateway ({name}); {what}", name, details) from error
