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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from argwatch.server.policy.collector_pause import paused_collector

_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class _TagMemoLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser, resolving a plain scalar's tag once per distinct text: the resolver (Python, a
    regex per candidate tag) was asked for each of a 10,000-tool policy's half a million scalars."""

    def __init__(self, stream: bytes | str) -> None:
        super().__init__(stream)
        self._plain_tags: dict[str, str] = {}

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        if not implicit[0]:
            return _STR  # quoted or tagged: SafeLoader's resolver, with no path resolvers, says str
        tag = self._plain_tags.get(value)
        if tag is None:
            tag = self._plain_tags[value] = super().resolve(kind, value, implicit)
        return tag


# Where PyYAML was built with libyaml (Debian's and PyPI's wheels are); else every read is the checked one.
_CLoader: type[_TagMemoLoader] | None = _TagMemoLoader if yaml.__with_libyaml__ else None

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


def _index(loader: Any, root: yaml.Node) -> tuple[dict[str, tuple[int, int]], list[Duplicate]]:  # a PyYAML loader
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
    """The document, as yaml.safe_load gives it, and its marks; DuplicateKeys if any mapping gives a key twice.

    libyaml's parser (in C) reads a clean document; the pure-Python one reads again only a document it
    refuses, so that every error is worded and placed exactly as before. The marks are found when first
    asked for: a clean policy never asks.
    """
    if _CLoader is not None:
        with paused_collector():  # a parse makes millions of young objects, none in a cycle
            clean = _load_clean(raw)
        if clean is not None:
            return clean
    return _load_checked(raw)


def _load_checked(raw: bytes | str) -> tuple[Any, Marks]:
    loader = _StrictLoader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        marks, duplicates = _index(loader, node)
        if duplicates:
            raise DuplicateKeys([str(found) for found in duplicates], duplicates)
        return loader.construct_document(node), marks
    except RecursionError:  # the pure-Python composer recurses once a level
        raise yaml.YAMLError("nested more deeply than this reader can follow") from None
    finally:
        loader.dispose()


def _load_clean(raw: bytes | str) -> tuple[Any, Marks] | None:
    """The document and its (lazy) marks; None if it has an error, an alias, a key given twice, or needs
    more than mappings, lists and scalars, or holds a tab."""
    assert _CLoader is not None
    # libyaml takes tabs where the checked reader refuses them (a line of a tab inside a flow list: found by
    # tests/unit/test_fast_readers.py): a document with one is the checked reader's to read or refuse.
    if (isinstance(raw, str) and "\t" in raw) or (isinstance(raw, bytes) and b"\t" in raw):
        return None
    loader = _CLoader(raw)
    try:
        node = loader.get_single_node()  # libyaml refuses nesting deeper than 1,000
        if node is None:
            return None, {}
        return _build(loader, node), _LazyMarks(loader, node)
    except (yaml.YAMLError, _NotPlain):
        return None
    finally:
        loader.dispose()


class _NotPlain(Exception):
    """The document needs the full reader: an alias, a key given twice, a merge key, a tag such as !!set."""


_SPECIAL_KEYS = {"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"}  # SafeConstructor rewrites these


def _build(loader: yaml.BaseLoader, root: yaml.Node) -> Any:
    """What SafeConstructor builds from `root`, in one pass and no recursion, for a document of mappings,
    lists and scalars. libyaml's composer makes an alias a second reference to its anchor's node: a node
    reached twice is refused here, before anything is expanded."""
    seen: set[int] = set()
    pending: list[tuple[yaml.Node, Any]] = []

    def new(node: yaml.Node) -> Any:
        if id(node) in seen:
            raise _NotPlain
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            return node.value if node.tag == _STR else loader.construct_object(node)
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            mapping: dict[Any, Any] = {}
            pending.append((node, mapping))
            return mapping
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            items: list[Any] = []
            pending.append((node, items))
            return items
        raise _NotPlain

    document = new(root)
    while pending:
        node, built = pending.pop()
        if isinstance(built, list):
            built.extend(new(item) for item in node.value)
            continue
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag in _SPECIAL_KEYS:
                raise _NotPlain
            key = new(key_node)
            if key in built:
                raise _NotPlain
            built[key] = new(value_node)
    return document


class _LazyMarks(Mapping[str, tuple[int, int]]):
    """A clean document's marks, indexed from its nodes when first asked for."""

    def __init__(self, loader: yaml.BaseLoader, root: yaml.Node) -> None:
        self._source: tuple[yaml.BaseLoader, yaml.Node] | None = (loader, root)
        self._marks: dict[str, tuple[int, int]] = {}

    def _index(self) -> dict[str, tuple[int, int]]:
        if self._source is not None:
            loader, root = self._source
            self._marks, self._source = _index(loader, root)[0], None
        return self._marks

    def __getitem__(self, path: str) -> tuple[int, int]:
        return self._index()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


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
