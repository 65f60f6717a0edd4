"""Every regex a policy writes runs in linear time: the Rust regex crate jsonschema-rs is built on.

A schema's `pattern` (or a patternProperties key) meets text the model wrote.
Python's `re` backtracks: `^(a+)+$` against 28 `a`s and a `!` took 10 s on the
event loop, and each added character doubled it, stalling every other call.
The fast schema check (jsonschema-rs) runs with the regex crate's engine
(RegexOptions), which guarantees time linear in the text, and cannot run what
needs backtracking (lookaround, backreferences): such a pattern is a policy
load error. The full check (the Python jsonschema library, which lists every
problem) calls `re.search` in exactly four places; `use_in_jsonschema` points
those at `search` below, which runs the same engine, so neither check
backtracks. CEL's `matches()` is the same crate already.
"""

from __future__ import annotations

import jsonschema_rs

LINEAR = jsonschema_rs.RegexOptions()
_COMPILED: dict[str, object] = {}  # pattern -> validator of {"pattern": it}; patterns come from the policy


MAX_MODEL_PATTERN = 1024  # `format: regex` on text the model wrote: longer is not a regex we will compile
_MODEL_LIMITS = jsonschema_rs.RegexOptions(size_limit=1 << 20, dfa_size_limit=1 << 20)


def cannot_run(pattern: str) -> str:
    """Why the linear-time engine cannot run `pattern` ("" when it can). For the policy's own patterns,
    which are then kept compiled."""
    try:
        _compiled(pattern)
    except ValueError as error:  # jsonschema_rs.ValidationError: "... is not a \"regex\""
        first = str(error).splitlines()[0]
        return f"{first}: the linear-time engine takes no lookaround or backreference"
    return ""


def is_regex(text: str) -> bool:
    """Whether the engine takes `text` as a regex: for `format: regex` on a value the model wrote. Compiled,
    answered and let go (never cached), within a length and a compiled-size limit (one 12-character
    pattern can compile to megabytes)."""
    if len(text) > MAX_MODEL_PATTERN:
        return False
    try:
        jsonschema_rs.Draft202012Validator({"pattern": text}, pattern_options=_MODEL_LIMITS)
    except ValueError:
        return False
    return True


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's, so ECMA-262's, semantics)."""
    return bool(_compiled(pattern).is_valid(text))  # type: ignore[attr-defined]


def _compiled(pattern: str) -> object:
    found = _COMPILED.get(pattern)
    if found is None:
        if len(_COMPILED) > 4096:  # policies hold far fewer; never unbounded
            _COMPILED.clear()
        found = _COMPILED[pattern] = jsonschema_rs.Draft202012Validator({"pattern": pattern}, pattern_options=LINEAR)
    return found


class _LinearRe:
    """What jsonschema's modules see as `re`: search() only, which is all they call."""

    search = staticmethod(search)


def use_in_jsonschema() -> None:
    """Points the jsonschema library's regex searches at the linear-time engine (idempotent)."""
    import jsonschema._keywords
    import jsonschema._legacy_keywords  # a subschema may name an older draft in its own $schema
    import jsonschema._utils

    # setattr: the stubs do not declare the modules' own `import re`.
    for module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
        setattr(module, "re", _LinearRe)  # noqa: B010


def pattern_texts(schema: object) -> list[str]:
    """Every pattern a schema holds (`pattern` values, patternProperties keys), at any depth, without where:
    patterns_in's paths, made for every node, were a fifth of a large catalogue's load, for the rare schema
    with a pattern to refuse."""
    found: list[str] = []
    stack = [schema]
    while stack:  # a loop, not recursion: a schema may be nested as deeply as its YAML allows
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.append(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    found.extend(pattern for pattern in value if isinstance(pattern, str))
                if isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(item for item in node if isinstance(item, dict | list))
    return found


def patterns_in(schema: object, path: str = "") -> list[tuple[str, str]]:
    """Every (json path, pattern) a schema holds: `pattern` values and patternProperties keys, at any depth."""
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "pattern" and isinstance(value, str):
                found.append((where, value))
            elif key == "patternProperties" and isinstance(value, dict):
                found.extend((f"{where}[{pattern!r}]", pattern) for pattern in value if isinstance(pattern, str))
            found.extend(patterns_in(value, where))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(patterns_in(item, f"{path}[{index}]"))
    return found
