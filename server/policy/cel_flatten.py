"""Rewrites a rule's field selections on args, record and session into plain variables, so CEL gets scalars, not maps.

The CEL library converts its variables from Python objects on every call, and a
map costs far more than a scalar: building the context for `args` and a record
as nested maps cost many times more than the same values as scalars
(docs/performance.md, "Design choices, measured"). So `args.amount_cents <= record.order.paid_cents` is
compiled, in addition, as `_args_12amount_cents <= _record_5order_10paid_cents`,
both variables read from the call's arguments and the found record. The two
programs compute the same thing. A rule this rewrite cannot take whole (a bare
`args`, a method called on a map, `has()`, an index such as `args['x']`) keeps
the nested form only: same answers, slower.

When a field the rule reads is absent from the call, the rule runs in its
nested form, so a missing key behaves exactly as it always did.
"""

from __future__ import annotations

from typing import NamedTuple

# How many field selections after each root make one variable: args.<name>, session.<key>,
# record.<binding>.<attribute>. Deeper selections stay selections on that variable's value.
_DEPTH = {"args": 1, "session": 1, "record": 2}
_QUOTES = "'\""
_STRING_PREFIXES = "rRbB"


class FlatRule(NamedTuple):
    expression: str  # the rewritten expression
    paths: tuple[tuple[str, tuple[str, ...]], ...]  # (variable, (root, field, ...)) for each variable it reads


def flatten(expression: str, element: str = "") -> FlatRule | None:
    """The expression with each root's field chain replaced by a variable; None when it cannot be done safely.

    `element` names one more root, an `each` rule's element (`item.quantity` -> `_item_8quantity`): it
    is bound anew for every element, and scalars cost less to hand CEL than the element's map.
    """
    depths = {**_DEPTH, element: 1} if element else _DEPTH
    out: list[str] = []
    variables: dict[tuple[str, ...], str] = {}
    i, n = 0, len(expression)
    while i < n:
        char = expression[i]
        if char in _QUOTES or (char in _STRING_PREFIXES and i + 1 < n and expression[i + 1] in _QUOTES):
            end = _string_end(expression, i)
            if end < 0:
                return None
            out.append(expression[i:end])
            i = end
            continue
        if char == "`":
            return None  # a quoted field name: not worth the rewrite
        if char.isalpha() or char == "_":
            end = _identifier_end(expression, i)
            name = expression[i:end]
            if name == "has":
                return None  # has(args.x) asks whether a field is present: it needs the map
            if name in depths and not _after_dot(expression, i):
                chain = _chain(expression, end, depths[name])
                if chain is None:
                    return None
                fields, end = chain
                path = (name, *fields)
                variable = variables.setdefault(path, variable_name(path))
                out.append(variable)
                i = end
                continue
            out.append(name)
            i = end
            continue
        out.append(char)
        i += 1
    if not variables:
        return None
    return FlatRule("".join(out), tuple((variable, path) for path, variable in variables.items()))


def variable_name(path: tuple[str, ...]) -> str:
    """One name per path, the same in every rule (a call's flat rules share one context).

    Each field is prefixed with its length, so two paths never share a name:
    record.order.paid_cents -> _record_5order_10paid_cents.
    """
    return "_" + path[0] + "".join(f"_{len(part)}{part}" for part in path[1:])


def _identifier_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return end


def _skip_blanks(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _after_dot(text: str, at: int) -> bool:
    """Whether the identifier at `at` is itself a field selection (x.args), not a root."""
    before = at - 1
    while before >= 0 and text[before] in " \t\r\n":
        before -= 1
    return before >= 0 and text[before] == "."


def _chain(text: str, at: int, depth: int) -> tuple[tuple[str, ...], int] | None:
    """`depth` field selections from `at` ('.name' each), and where they end; None if not exactly that."""
    fields: list[str] = []
    for _ in range(depth):
        dot = _skip_blanks(text, at)
        if dot >= len(text) or text[dot] != ".":
            return None  # a bare root, or an index (args['x']): not a plain selection
        start = _skip_blanks(text, dot + 1)
        if start >= len(text) or not (text[start].isalpha() or text[start] == "_"):
            return None  # args.?x (optional selection), or a quoted field
        at = _identifier_end(text, start)
        fields.append(text[start:at])
    after = _skip_blanks(text, at)
    if after < len(text) and text[after] == "(":
        return None  # the last name is a method called on the map (record.order.size())
    return tuple(fields), at


def _string_end(text: str, start: int) -> int:
    """Where the string literal starting at `start` (with an optional r/b prefix) ends; -1 if it does not."""
    i = start
    raw = False
    while text[i] in _STRING_PREFIXES:
        raw = raw or text[i] in "rR"
        i += 1
    quote = text[i]
    triple = text[i : i + 3] == quote * 3
    closing = quote * 3 if triple else quote
    i += len(closing)
    while i < len(text):
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text.startswith(closing, i):
            return i + len(closing)
        if text[i] == "\n" and not triple:
            return -1
        i += 1
    return -1
