"""Types of the C extension built from _digest.c (keyed BLAKE2b-256 digests of argument values)."""

from collections.abc import Callable, Mapping

class Digester:
    def __init__(self, key: bytes, encode: Callable[[object], bytes]) -> None: ...
    def digest(self, value: object) -> str: ...
    def digest_bytes(self, data: bytes) -> str: ...
    def compose(
        self,
        at_ns: int,
        call: object,
        verdict: object,
        latency_ns: int,
        head: bytes,
        problems: bytes,
        skipped: bytes,
        hash_arguments: bool,
        hash_session: bool,
        extra: bytes,
        max_text: int,
    ) -> bytes: ...
    def digest_arguments(self, arguments: Mapping[str, object], limit: int, max_text: int) -> dict[str, str]: ...
