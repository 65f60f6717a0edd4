"""YAML (and JSON) read strictly: a key given twice in one mapping is an error naming both lines, never "last wins";
and no aliases, which can expand a small file into gigabytes.

PyYAML and the json module both keep the last of two equal keys without a word,
so a policy with two `transfer_stock` entries (reject with a binding, then
observe) loaded as the second one: a check an operator wrote silently vanished.

A YAML document can also be read with its marks: where each key path
(`tools.refund_order.mode`, `tools.t.rules[0].expr`, the policy loader's own
spelling) starts, so every error about it can name its line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

Marks = Mapping[str, tuple[int, int]]
"""Key path -> (line, column), both from 1: where a mapping's key, or a list's item, starts."""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """One key given again in the same mapping."""

    path: str  # the key's path, as the policy loader spells it: "tools.transfer_stock"
    key: object
    line: int
    column: int
    first_line: int

    def __str__(self) -> str:
        return f"line {self.line}: {self.path} given again (first at line {self.first_line})"


class DuplicateKeys(ValueError):
    """Keys given twice; each entry says where: 'line 12: tools.transfer_stock given again (first at line 4)'."""

    def __init__(self, found: list[str], duplicates: list[Duplicate] | None = None) -> None:
        super().__init__("; ".join(found))
        self.found = found
        self.duplicates = duplicates or []


class _StrictLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        # An alias (*name, and so a merge key <<: *name) can expand a 500-byte file into gigabytes
        # ("billion laughs"): a policy or definitions file spells each thing out.
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) and merge keys are not accepted here: write the value out", mark
            )
        return super().compose_node(parent, index)


def _path(parent: str, key: object) -> str:
    return f"{parent}.{key}" if parent else str(key)


def _index(loader: yaml.SafeLoader, root: yaml.Node) -> tuple[dict[str, tuple[int, int]], list[Duplicate]]:
    """Where each key path starts, and every key given again in its mapping, from the composed nodes."""
    marks: dict[str, tuple[int, int]] = {}
    duplicates: list[Duplicate] = []
    pending: list[tuple[yaml.Node, str]] = [(root, "")]
    while pending:
        node, path = pending.pop()
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a mapping or list as a key: construction refuses it (unhashable)
                key = loader.construct_object(key_node)
                where = _path(path, key)
                line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                if key in first_line:
                    duplicates.append(Duplicate(where, key, line, column, first_line[key]))
                else:
                    first_line[key] = line
                    marks.setdefault(where, (line, column))
                pending.append((value_node, where))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                where = f"{path}[{index}]"
                marks.setdefault(where, (item.start_mark.line + 1, item.start_mark.column + 1))
                pending.append((item, where))
    duplicates.sort(key=lambda found: found.line)
    return marks, duplicates


def load_yaml_marked(raw: bytes | str) -> tuple[Any, Marks]:
    """The document, as yaml.safe_load gives it, and its marks; DuplicateKeys if any mapping gives a key twice."""
    loader = _StrictLoader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        marks, duplicates = _index(loader, node)
        if duplicates:
            raise DuplicateKeys([str(found) for found in duplicates], duplicates)
        return loader.construct_document(node), marks
    finally:
        loader.dispose()


def load_yaml(raw: bytes | str) -> Any:
    """The document, as yaml.safe_load gives it; DuplicateKeys if any mapping gives a key twice."""
    return load_yaml_marked(raw)[0]


def load_json(raw: bytes | str) -> Any:
    """The document, as json.loads gives it; DuplicateKeys if any object gives a key twice."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                duplicates.append(f"{key!r} given twice in one object")
            seen[key] = value
        return seen

    document = json.loads(raw, object_pairs_hook=pairs)
    if duplicates:
        raise DuplicateKeys(duplicates)
    return document
