"""What a rule's CEL expression reads of the call's arrays: element paths (`items[*].quantity`) and the lists it walks.

A rule is typed by what it reads (loader.py): CEL compares values of different
types as unequal, so an element field sent as "5" could pass `i.quantity != 5`.
Top-level `args.<name>` reads are found by a pattern; reads through an array
need the comprehension variables followed: in `args.items.all(i, i.quantity >
0)`, `i` stands for every element of `items`, so the rule reads
`items[*].quantity` and walks `items`. This reads the expression's tokens
with a small parser that knows CEL's postfix chains (`.field`, `[index]`,
`.method(...)`, the macros `all`, `exists`, `exists_one`, `map` and `filter`)
and treats every operator alike, which is all it needs: CEL itself compiles
and runs the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argwatch.server.policy.arg_paths import EVERY, join

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_ROOTS = frozenset({"args", "record"})
_CLOSERS = frozenset({")", "]", "}", ","})
_OPERATORS = ("==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "!", "?", ":")

Steps = tuple[str | None, ...]  # property names, EVERY for every element of an array


@dataclass(frozen=True, slots=True)
class _Ref:
    """What a sub-expression denotes, when it is a path into the call: a root (`args`, `record`) and steps."""

    root: str
    steps: Steps


@dataclass(slots=True)
class RuleReads:
    """The paths one expression reads through arrays, as patterns of the arguments and of records."""

    # Argument paths read as values, each with at least one `[*]` (items[*].quantity, item_ids[*]).
    elements: set[str] = field(default_factory=set)
    # Argument arrays the expression walks (a macro's list, or one indexed): `items`, `items[*].tags`.
    walked: set[str] = field(default_factory=set)
    # Record lists it walks: ("order", "items") for record.order.items.all(...), EVERY for a list's elements.
    record_lists: set[Steps] = field(default_factory=set)
    # Whether it calls the sum() the gateway registers (rule_functions.py).
    sums: bool = False
    # False when the parser lost its way (a form it does not know): what it found may be incomplete.
    followed: bool = True


def rule_reads(expression: str, element: tuple[str, Steps] | None = None) -> RuleReads:
    """What `expression` reads through arrays; `element` binds a variable to every element of a path
    (a rule's `each`, whose elements are `item`)."""
    reads = RuleReads()
    scope: dict[str, _Ref | None] = {}
    if element is not None:
        scope[element[0]] = _Ref("args", element[1])
    parser = _Parser(_tokens(expression), reads)
    try:
        parser.expression(scope, read=True)
    except _Unreadable:
        reads.followed = False
    return reads


def pattern(steps: Steps) -> str:
    """An argument path's pattern: ("items", EVERY, "sku") is `items[*].sku`."""
    text = ""
    for step in steps:
        text = text + "[*]" if step is EVERY else join(text, step)
    return text


class _Unreadable(Exception):
    """The tokens end where the parser expects more: CEL compiled it, so it is a form this does not follow."""


def _tokens(text: str) -> list[str]:
    """The expression's tokens: identifiers, numbers, string literals (kept whole, quotes included) and
    operators; blanks dropped."""
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char in " \t\r\n":
            i += 1
        elif _string_start(text, i):
            end = _string_end(text, i)
            tokens.append(text[i:end])
            i = end
        elif char.isalpha() or char == "_":
            end = i
            while end < n and (text[end].isalnum() or text[end] == "_"):
                end += 1
            tokens.append(text[i:end])
            i = end
        elif char.isdigit():  # 12, 1.5e-3, 0x1F, 7u
            end = i + 1
            while end < n and (
                text[end].isalnum() or text[end] in "._" or (text[end] in "+-" and text[end - 1] in "eE")
            ):
                end += 1
            tokens.append(text[i:end])
            i = end
        else:
            two = text[i : i + 2]
            token = two if two in _OPERATORS else char
            tokens.append(token)
            i += len(token)
    return tokens


def _string_start(text: str, at: int) -> bool:
    """Whether a string literal starts at `at`: a quote, or one or two of the r/b prefixes and a quote."""
    for prefix in range(3):
        if at + prefix >= len(text):
            return False
        if text[at + prefix] in "'\"":
            return True
        if text[at + prefix] not in "rRbB":
            return False
    return False


def _string_end(text: str, start: int) -> int:
    i = start
    raw = False
    while text[i] not in "'\"":
        raw = raw or text[i] in "rR"
        i += 1
    quote = text[i]
    closing = quote * 3 if text[i : i + 3] == quote * 3 else quote
    i += len(closing)
    while i < len(text):
        if text[i] == "\\" and not raw:
            i += 2
        elif text.startswith(closing, i):
            return i + len(closing)
        else:
            i += 1
    return len(text)


class _Parser:
    def __init__(self, tokens: list[str], reads: RuleReads) -> None:
        self.tokens = tokens
        self.at = 0
        self.reads = reads

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise _Unreadable
        self.at += 1
        return token

    def expression(self, scope: dict[str, _Ref | None], *, read: bool) -> _Ref | None:
        """Units joined by operators, up to a closing bracket or a comma. Returns the path the expression
        is, when it is one unit (a receiver, a parenthesised path); any other path is read here."""
        units: list[_Ref | None] = []
        while True:
            while self.peek() in ("!", "-"):  # prefix operators
                self.take()
            units.append(self.unit(scope))
            token = self.peek()
            if not token or token in _CLOSERS:
                break
            self.take()  # an operator between units (ternary ? and : included)
        if len(units) == 1 and not read:
            return units[0]
        for unit in units:
            self.read(unit)
        return None

    def read(self, ref: _Ref | None) -> None:
        if ref is not None and ref.root == "args" and EVERY in ref.steps:
            self.reads.elements.add(pattern(ref.steps))

    def walk(self, ref: _Ref | None) -> None:
        if ref is None or not ref.steps:
            return
        if ref.root == "args":
            self.reads.walked.add(pattern(ref.steps))
        elif ref.root == "record" and len(ref.steps) >= 2:
            self.reads.record_lists.add(ref.steps)

    def arguments(self, scope: dict[str, _Ref | None]) -> None:
        """A call's arguments, each read whole, through the closing parenthesis."""
        while self.peek() != ")":
            self.expression(scope, read=True)
            if self.peek() == ",":
                self.take()
        self.take(")")

    def unit(self, scope: dict[str, _Ref | None]) -> _Ref | None:
        token = self.take()
        ref: _Ref | None = None
        if token == "(":
            ref = self.expression(scope, read=False)
            self.take(")")
        elif token in ("[", "{"):
            closing = "]" if token == "[" else "}"
            while self.peek() != closing:
                self.expression(scope, read=True)
                if self.peek() == ",":
                    self.take()
            self.take(closing)
        elif token[0].isalpha() or token[0] == "_":
            if self.peek() == "(":  # a function: has(x.f) asks only whether x.f is there, so reads no value
                self.take("(")
                if token == "has":
                    self.expression(scope, read=False)
                    self.take(")")
                else:
                    self.reads.sums = self.reads.sums or token == "sum"
                    self.arguments(scope)
            elif token in scope:
                ref = scope[token]
            elif token in _ROOTS:
                ref = _Ref(token, ())
        return self.postfix(ref, scope)

    def postfix(self, ref: _Ref | None, scope: dict[str, _Ref | None]) -> _Ref | None:
        while self.peek() in (".", "["):
            if self.take() == "[":
                start = self.at
                self.expression(scope, read=True)
                self.take("]")
                key = self.tokens[start]
                if ref is not None:
                    if self.at == start + 2 and key[:1] in ("'", '"'):  # x['name']: a field
                        ref = _Ref(ref.root, (*ref.steps, key[1:-1]))
                    else:  # x[0], x[k]: an element (of a list; a map's key read so is typed the same way)
                        self.walk(ref)
                        ref = _Ref(ref.root, (*ref.steps, EVERY))
                continue
            if self.peek() == "?":  # an optional selection, .?field
                self.take()
            name = self.take()
            if self.peek() != "(":
                ref = _Ref(ref.root, (*ref.steps, name)) if ref is not None else None
                continue
            self.take("(")
            if name in MACROS and self.peek(1) == ",":
                ref = self.macro(name, ref, scope)
                continue
            self.read(ref)  # a method's receiver is read whole (items[*].sku.startsWith(...))
            self.reads.sums = self.reads.sums or name == "sum"
            self.arguments(scope)
            ref = None
        return ref

    def macro(self, name: str, ref: _Ref | None, scope: dict[str, _Ref | None]) -> _Ref | None:
        """`<list>.all(v, ...)`: v is every element of the list within the parentheses."""
        variable = self.take()
        self.take(",")
        self.walk(ref)
        inner = dict(scope)
        inner[variable] = _Ref(ref.root, (*ref.steps, EVERY)) if ref is not None else None
        while True:
            self.expression(inner, read=True)
            if self.take() == ")":
                break
        # filter keeps the list's own elements; the others make booleans or new values.
        return ref if name == "filter" else None
