"""A call's arrays as a rule reads them: each element path type-checked, each list bounded, only what is read kept.

Before CEL sees a rule over arrays, every value it reads through an array is
checked against its declared JSON type (CEL compares across types, so a
quantity sent as "5" must not reach `i.quantity != 5`), and every list it
walks against `limits.max_elements` (CEL's time grows with the list; its
`map` and `filter` grow with its square). What CEL is handed holds only the
fields the rule reads, each element cut to the bound: less to convert, and
nothing untyped to compare. A fault names the concrete path (`items[2].quantity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from argwatch.server.policy.arg_paths import EVERY, format_path
from argwatch.server.policy.model import ReadNode, Rule, Steps
from argwatch.server.verdict.set_checks import as_json_text
from argwatch.server.verdict.tool_call import json_kind

Parts = tuple[str | int, ...]  # a concrete path: ("items", 2, "quantity") is items[2].quantity
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # CEL's int


class Fault(NamedTuple):
    """A value a rule reads that it cannot be judged on, at a concrete path."""

    parts: Parts
    why: str  # "items[2].quantity is a string \"5\"", "items has 300 elements; ..."
    length: int = 0  # of a list longer than the bound: how many elements it has


class Prepared(NamedTuple):
    arguments: dict[str, object]  # the arguments the rule reads, as CEL is to see them
    faults: list[Fault]
    over: list[Fault]  # lists longer than the bound: the elements past it are not judged


def prepare(
    rule: Rule, arguments: Mapping[str, object], found: Mapping[str, Mapping[str, Any]], max_elements: int
) -> Prepared:
    """The rule's arguments checked against what it reads (rule.arrays), and its record lists bounded."""
    assert rule.arrays is not None
    walk = _Walk(max_elements)
    plan = rule.arrays.plan
    projected: dict[str, object] = {}
    for name in rule.arguments | plan.keys():
        if name in arguments:
            node = plan.get(name)
            projected[name] = walk.value(arguments[name], node, (name,)) if node else arguments[name]
    for steps in rule.arrays.record_lists:
        walk.record(found, steps)
    return Prepared(projected, walk.faults, walk.over)


def elements(projected: Mapping[str, object], each: Steps) -> list[tuple[Parts, object]]:
    """The elements an `each` path names in the prepared arguments, with their concrete paths."""
    found: list[tuple[Parts, object]] = [((), projected)]
    for step in each:
        deeper: list[tuple[Parts, object]] = []
        for parts, value in found:
            if step is EVERY:
                if isinstance(value, list):
                    deeper.extend(((*parts, index), element) for index, element in enumerate(value))
            elif isinstance(value, Mapping) and step in value:
                deeper.append(((*parts, step), value[step]))
        found = deeper
    return found


def is_json_type(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, Mapping)
    return value is None  # null


class _Walk:
    def __init__(self, max_elements: int) -> None:
        self.max_elements = max_elements
        self.faults: list[Fault] = []
        self.over: list[Fault] = []

    def value(self, value: object, node: ReadNode, parts: Parts) -> object:
        """`value` as CEL is to see it: checked against `node`, cut to what is read."""
        if node.kinds:
            if not any(is_json_type(value, kind) for kind in node.kinds):
                self.faults.append(Fault(parts, _sent(parts, value)))
                return value
            value = self._number(value, node.kinds, parts)
        projected = value
        if node.elements is not None:
            if not isinstance(value, list):
                self.faults.append(Fault(parts, f"{_sent(parts, value)}, not an array"))
                return value
            if len(value) > self.max_elements:
                self.over.append(Fault(parts, self._too_long(format_path(parts), len(value)), len(value)))
            projected = [
                self.value(element, node.elements, (*parts, index))
                for index, element in enumerate(value[: self.max_elements])
            ]
        elif node.fields:
            if not isinstance(value, Mapping):
                self.faults.append(Fault(parts, f"{_sent(parts, value)}, not an object"))
                return value
            projected = {
                name: self.value(value[name], child, (*parts, name))
                for name, child in node.fields.items()
                if name in value
            }
        # A value the rule reads whole (size(o.lines), an element compared as a string) is handed whole, but
        # never a list past the bound: that is a fault already (`over`), and its rest must not reach CEL.
        if node.kinds and not (
            node.elements is not None and isinstance(value, list) and len(value) > self.max_elements
        ):
            return value
        return projected

    def _number(self, value: object, kinds: tuple[str, ...], parts: Parts) -> object:
        """An integer as CEL can hold it: 2.0 (JSON's integer too) as 2, so int arithmetic on it runs; one
        beyond CEL's 64 bits is a fault, where CEL would make it a uint or a double and compare that."""
        if isinstance(value, bool) or not isinstance(value, int | float) or "integer" not in kinds:
            return value
        if isinstance(value, float) and "number" in kinds:
            return value
        if not _INT_MIN <= value <= _INT_MAX:
            self.faults.append(Fault(parts, f"{_sent(parts, value)}, beyond the integers a rule computes with"))
            return value
        return int(value)

    def record(self, found: Mapping[str, Any], steps: Steps) -> None:
        """Bounds a record list a rule walks (record.order.items): the owner's data, not typed, but its
        length decides how long CEL runs."""
        nodes: list[tuple[Parts, object]] = [((), found)]
        for step in steps:
            deeper: list[tuple[Parts, object]] = []
            for parts, value in nodes:
                if step is EVERY:
                    if isinstance(value, list):
                        deeper.extend(((*parts, i), v) for i, v in enumerate(value[: self.max_elements]))
                elif isinstance(value, Mapping) and step in value:
                    deeper.append(((*parts, step), value[step]))
            nodes = deeper
        for parts, value in nodes:
            where = "record." + format_path(parts)
            if not isinstance(value, list):
                self.faults.append(Fault(("record", *parts), f"{where} is {json_kind(value)}, not a list"))
            elif len(value) > self.max_elements:
                self.over.append(Fault(("record", *parts), self._too_long(where, len(value)), len(value)))

    def _too_long(self, where: str, length: int) -> str:
        return f"{where} has {length} elements; a rule judges at most {self.max_elements} (limits.max_elements)"


def _sent(parts: Parts, value: object) -> str:
    return f"{format_path(parts)} is {json_kind(value)} {as_json_text(value, 40)}"
