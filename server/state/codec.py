"""What the gateway writes to Redis and reads back: JSON of declared shapes, validated on read; never code.

Anyone who can write a key in the shared Redis can hand every gateway a value.
Pickle would run whatever such a value says. Here a value is JSON in an
envelope naming its type, one of the shapes the gateway declared with
`@shared_value`; msgspec decodes it into exactly that type and checks every
field on the way. Anything else (not JSON, an unknown type, a field of the
wrong type) comes back as a `Corrupt` reading, which the shared cache counts
and treats as a miss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_BY_TAG: dict[str, type[Any]] = {"str": str, "float": float, "bool": bool, "int": int}
_TAG_OF: dict[type[Any], str] = {kind: tag for tag, kind in _BY_TAG.items()}
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
_ENCODER = msgspec.json.Encoder()


class _Envelope(msgspec.Struct, array_like=True, frozen=True):
    tag: str
    value: msgspec.Raw


_OPEN = msgspec.json.Decoder(_Envelope)


def shared_value(tag: str) -> Callable[[type[T]], type[T]]:
    """Declares a class (a frozen dataclass or NamedTuple of plain fields) as storable under `tag`."""

    def declare(kind: type[T]) -> type[T]:
        if _BY_TAG.get(tag, kind) is not kind:
            raise ValueError(f"shared value tag {tag!r} is taken by {_BY_TAG[tag].__qualname__}")
        _BY_TAG[tag], _TAG_OF[kind] = kind, tag
        return kind

    return declare


class Corrupt:
    """A value read back that is not one the gateway wrote: `reason` is not_json, unknown_type or bad_shape."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def encode(value: object) -> bytes:
    tag = _TAG_OF.get(type(value))
    if tag is None:
        raise TypeError(f"{type(value).__qualname__} is not declared with @shared_value")
    return _ENCODER.encode(_Envelope(tag, msgspec.Raw(_ENCODER.encode(value))))


def decode(raw: bytes | str) -> Any:
    """The value, of the type its envelope names; a Corrupt reading for anything else. Never raises."""
    try:
        envelope = _OPEN.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Corrupt("not_json")
    kind = _BY_TAG.get(envelope.tag)
    if kind is None:
        return Corrupt("unknown_type")
    decoder = _DECODERS.get(envelope.tag)
    if decoder is None:
        decoder = _DECODERS[envelope.tag] = msgspec.json.Decoder(kind)
    try:
        return decoder.decode(envelope.value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Corrupt("bad_shape")
