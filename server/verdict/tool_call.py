"""A tool call as the gateway's domain sees it, and decoding of the model's raw JSON arguments."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import orjson


class ToolCall(NamedTuple):
    """One call to check. `arguments` is None when the arguments could not be decoded.

    A NamedTuple, not a frozen dataclass: one is built per call, and a frozen
    dataclass costs about three times as much to build (see findings.py).
    """

    tool: str
    arguments: Mapping[str, object] | None
    call_id: str
    conversation_id: str = ""
    customer_id: str = ""
    tenant: str = ""
    arguments_error: str = ""  # why `arguments` is None
    raw_arguments: bytes = b""  # the raw JSON, kept to fingerprint undecodable calls
    model: str = ""  # the model that wrote the call, as the caller names it (bounded at the edge)
    prompt_version: str = ""  # the agent's prompt version, as the caller names it (bounded at the edge)


def decode_json_arguments(raw: bytes) -> tuple[Mapping[str, object] | None, str]:
    """(arguments, "") for a JSON object; (None, reason) for anything else. Never raises."""
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        return None, f"not valid JSON: {error}"
    if not isinstance(decoded, dict):
        return None, f"expected a JSON object, got {json_kind(decoded)}"
    return decoded, ""


def json_kind(value: object) -> str:
    """A decoded JSON value's type, as a message says it: "null", "a boolean", "a number", "a string", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
