"""Paths into a call's arguments: `items[*].sku` in a policy, `items[2].sku` in a problem.

One notation everywhere an argument is named (bindings, problems, repair text,
the sampled log, coverage): names joined by dots, `[n]` for an array's element
and `[*]` for every element. A name that is not a plain identifier (a model may
write any key) is quoted as JSON: `filters["a.b"]`, so a path is never
ambiguous. Metric labels use the pattern a policy wrote, never an index or a
key the model made up (label_for).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Every element of an array, in a pattern; the step that stands for it in ArgPath.steps.
EVERY = None
# A name written bare: anything but the path's own marks (tool definitions name arguments freely,
# "Größe_count" and "dry-run" included); any other is quoted as JSON.
_PLAIN = re.compile(r'[^.\[\]"]+')
_STEP = re.compile(r'\.([^.\[\]"]+)|\[(\*|\d+|"(?:[^"\\]|\\.)*")\]')
_INDEX = re.compile(r"\[\d+\]")
_QUOTED_FIRST = re.compile(r'\["((?:[^"\\]|\\.)*)"\]')
MAX_PATH_STEPS = 16


@dataclass(frozen=True, slots=True)
class ArgPath:
    """A parsed pattern: `steps` are property names, with EVERY for `[*]`."""

    pattern: str
    steps: tuple[str | None, ...]

    @property
    def top(self) -> str:
        """The top-level argument the path starts at."""
        first = self.steps[0]
        assert first is not None
        return first

    @property
    def nested(self) -> bool:
        return len(self.steps) > 1

    @property
    def in_arrays(self) -> bool:
        """Whether it names the elements of some array (one value per element, not one per call)."""
        return EVERY in self.steps


def parse_path(text: str) -> ArgPath:
    """`items[*].sku` as an ArgPath; ValueError says what is wrong with a malformed one.

    A name without `.`, `[`, `]` or `"` is one argument whatever else it holds, so every policy
    written before paths reads as before.
    """
    if not text:
        raise ValueError("an argument path cannot be empty")
    if not any(mark in text for mark in '.[]"'):
        return ArgPath(text, (text,))
    first = _PLAIN.match(text) or _QUOTED_FIRST.match(text)
    if first is None:
        raise ValueError(f'{text!r}: a path starts with an argument\'s name (items[*].sku, shipping.country, ["a.b"])')
    steps: list[str | None] = [first.group(0) if first.re is _PLAIN else json.loads(f'"{first.group(1)}"')]
    position = first.end()
    while position < len(text):
        step = _STEP.match(text, position)
        if step is None:
            raise ValueError(
                f'{text!r}: cannot read {text[position:]!r}; after a name comes .name, [*] or ["quoted name"]'
            )
        name, bracket = step.group(1), step.group(2)
        if name is not None:
            steps.append(name)
        elif bracket == "*":
            steps.append(EVERY)
        elif bracket.startswith('"'):
            steps.append(json.loads(bracket))
        else:
            raise ValueError(f"{text!r}: a binding names every element ([*]), not one index ([{bracket}])")
        position = step.end()
    if len(steps) > MAX_PATH_STEPS:
        raise ValueError(f"{text!r}: more than {MAX_PATH_STEPS} steps")
    return ArgPath(text, tuple(steps))


def format_path(parts: Iterable[str | int]) -> str:
    """A concrete path as problems name it: ("items", 2, "sku") is `items[2].sku`; "" for the whole call."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text


def join(path: str, part: str | int) -> str:
    """`path` one step further down (format_path for a path already written)."""
    step = format_path([part])
    if isinstance(part, int) or not path or step.startswith("["):
        return path + step
    return f"{path}.{step}"


def pattern_of(concrete: str) -> str:
    """The pattern a concrete path matches: every index is `[*]` (`items[2].sku` -> `items[*].sku`)."""
    return _INDEX.sub("[*]", concrete) if "[" in concrete else concrete


def top_of(path: str) -> str:
    """The top-level argument a path (concrete or pattern) starts at."""
    quoted = _QUOTED_FIRST.match(path)
    if quoted is not None:
        return str(json.loads(f'"{quoted.group(1)}"'))
    plain = _PLAIN.match(path)
    return plain.group(0) if plain is not None else path


def names_in(path: str) -> list[str]:
    """The property names along a path, concrete or a pattern (`payment.card[2].number` -> payment, card,
    number): what `sampling.redact` is matched against, so a redacted name is redacted at any depth."""
    return [plain or json.loads(f'"{quoted}"') for plain, quoted in _NAMES.findall(path)]


_NAMES = re.compile(r'(?:^|\.)([^.\["]+)|\["((?:[^"\\]|\\.)*)"\]')


def label_for(concrete: str, known: frozenset[str]) -> str | None:
    """The metric label of an argument path: the pattern a policy knows, else its top-level argument if
    the policy knows that, else None (the caller writes `_unknown`). Never an index or a model's key."""
    if concrete in known:
        return concrete
    pattern = pattern_of(concrete)
    if pattern in known:
        return pattern
    top = top_of(concrete)
    return top if top in known else None
