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

from argwatch.server.policy.arg_paths import EVERY, ArgPath, join


class Located(NamedTuple):
    """What a path names in one call's arguments."""

    found: list[tuple[str, object]]  # (concrete path, value), in the arguments' order
    missing: list[str]  # concrete paths where the path stopped: a key absent
    misshapen: list[tuple[str, object, str]]  # (concrete path, value, what was needed there: "an object", "an array")
    unchecked: int  # elements past the limit, not looked at


def locate(arguments: Mapping[str, object], path: ArgPath, limit: int) -> Located:
    """Every value `path` names in `arguments`, at most `limit` of them."""
    frontier: list[tuple[str, object]] = [("", arguments)]
    missing: list[str] = []
    misshapen: list[tuple[str, object, str]] = []
    unchecked = 0
    for step in path.steps:
        reached: list[tuple[str, object]] = []
        for where, node in frontier:
            if step is EVERY:
                if not isinstance(node, list):
                    misshapen.append((where, node, "an array"))
                    continue
                room = limit - len(reached)
                unchecked += max(0, len(node) - room)
                reached.extend((join(where, index), item) for index, item in enumerate(node[: max(0, room)]))
            elif not isinstance(node, Mapping):
                misshapen.append((where, node, "an object"))
            elif step in node:
                reached.append((join(where, step), node[step]))
            else:
                missing.append(join(where, step))
        frontier = reached
    return Located(frontier, missing, misshapen, unchecked)
