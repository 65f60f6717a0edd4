"""Types of the C extension built from _request.c (a ValidateRequest's fields read from its bytes)."""

from collections.abc import Callable

from argwatch.server.verdict.tool_call import ToolCall

def read_validate(body: bytes) -> tuple[str, bytes | None, str, str, str, str, str, str] | None: ...
def configure(
    call_type: type[ToolCall],
    loads: Callable[[bytes], object],
    loads_error: type[Exception],
    limits: tuple[int, int, int, int, int, int, int],
) -> None: ...
def read_call(body: bytes) -> ToolCall | None: ...
