"""YAML (and JSON) read strictly: a key given twice in one mapping is an error naming both lines, never "last wins";
and no aliases, which can expand a small file into gigabytes.

PyYAML and the json module both keep the last of two equal keys without a word,
so a policy with two `transfer_stock` entries (reject with a binding, then
observe) loaded as the second one: a check an operator wrote silently vanished.
"""

from __future__ import annotations

import json
from typing import Any

import yaml


class DuplicateKeys(ValueError):
    """Keys given twice; each entry says where: 'line 12: tools.transfer_stock again (first at line 4)'."""

    def __init__(self, found: list[str]) -> None:
        super().__init__("; ".join(found))
        self.found = found


class _StrictLoader(yaml.SafeLoader):
    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def compose_node(self, parent: Any, index: Any) -> Any:
        # An alias (*name, and so a merge key <<: *name) can expand a 500-byte file into gigabytes
        # ("billion laughs"): a policy or definitions file spells each thing out.
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) and merge keys are not accepted here: write the value out", mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first_line:
                    self.duplicates.append(f"line {line}: {key!r} given again (first at line {first_line[key]})")
                else:
                    first_line[key] = line
            except TypeError:  # an unhashable key: construct_mapping below says so
                pass
        return super().construct_mapping(node, deep=deep)


def load_yaml(raw: bytes | str) -> Any:
    """The document, as yaml.safe_load gives it; DuplicateKeys if any mapping gives a key twice."""
    loader = _StrictLoader(raw)
    try:
        document = loader.get_single_data()
    finally:
        loader.dispose()
    if loader.duplicates:
        raise DuplicateKeys(loader.duplicates)
    return document


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
