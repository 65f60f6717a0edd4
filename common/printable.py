"""Text a caller or a model wrote, made safe to print to a terminal or into a comment line.

Control characters (a newline, ESC and its sequences, C1 controls) and the
bidirectional overrides are written as escapes: a call id cannot end a line
early, move the cursor, hide text, or turn a YAML comment into YAML.
"""

from __future__ import annotations

_ESCAPED = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_ESCAPED.update({code: f"\\u{code:04x}" for code in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def printable(text: str) -> str:
    """`text` with every control and direction-changing character escaped."""
    return text.translate(_ESCAPED)
