"""The values a binding's path names in one call: each element's, with its concrete path, bounded.

`items[*].sku` on `{"items": [{"sku": "A"}, {"qty": 2}, 7]}` finds `items[0].sku`
("A"), finds `items[1].sku` absent, and `items[2]` no object. What is absent or
of the wrong shape is returned, never skipped: whether that is a problem is the
binding's to say (required), and the schema's. At most `limit` values are taken
per binding; the elements past it are counted (`unchecked`), so a call with
100,000 elements costs no more than one with `limit`, and says what it left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from argwatch.server.policy.arg_paths import EVERY, ArgPath

Parts = tuple[str | int, ...]  # a concrete path's steps: ("items", 2, "sku"); format_path writes it


class Located(NamedTuple):
    """What a path names in one call's arguments. Paths are kept as their steps and written (format_path)
    only where a problem names them: most values are fine, and writing every path costs more than checking."""

    found: list[tuple[Parts, object]]  # (concrete path, value), in the arguments' order
    missing: list[Parts]  # concrete paths where the path stopped: a key absent
    misshapen: list[tuple[Parts, object, str]]  # (concrete path, value, what was needed there: "an object", "an array")
    unchecked: int  # elements past the limit, not looked at


def locate(arguments: Mapping[str, object], path: ArgPath, limit: int) -> Located:
    """Every value `path` names in `arguments`, at most `limit` of them."""
    frontier: list[tuple[Parts, object]] = [((), arguments)]
    missing: list[Parts] = []
    misshapen: list[tuple[Parts, object, str]] = []
    unchecked = 0
    for step in path.steps:
        reached: list[tuple[Parts, object]] = []
        for where, node in frontier:
            if step is EVERY:
                if not isinstance(node, list):
                    misshapen.append((where, node, "an array"))
                    continue
                room = limit - len(reached)
                unchecked += max(0, len(node) - room)
                reached.extend(((*where, index), item) for index, item in enumerate(node[: max(0, room)]))
            elif not isinstance(node, Mapping):
                misshapen.append((where, node, "an object"))
            elif step in node:
                reached.append(((*where, step), node[step]))
            else:
                missing.append((*where, step))
        frontier = reached
    return Located(frontier, missing, misshapen, unchecked)
