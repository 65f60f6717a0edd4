"""Last-good copies of value sets on disk, so a restart with a source down serves stale-but-known sets.

One JSON file per set in the snapshot directory, written atomically (a temporary
file, then rename) in a worker thread whenever a new version is installed. At
start they are read before any source is asked: each set loads as stale, with
its real age (confirmed_at as saved), until its source confirms it; past
max_staleness it is unavailable like any other copy.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson

from argwatch.common.files import SAVED_COPY_BYTES, read_file
from argwatch.server.sets.payload import Retirement, SetPayload
from argwatch.server.sets.snapshot import ValueSetSnapshot
from argwatch.server.state.atomic_file import remove_leftovers, write_atomically

log = logging.getLogger("argwatch.valuesets")

FORMAT = 1


def path_for(folder: str, name: str) -> str:
    # Set names are policy keys ("refunds.reason_codes"); keep them readable but file-safe.
    safe = "".join(char if char.isalnum() or char in "._-" else "_" for char in name)
    return os.path.join(folder, f"{safe}.json")


def save(folder: str, snapshot: ValueSetSnapshot, confirmed_at: float, incarnation: str = "") -> None:
    """Writes the snapshot atomically; call from a worker thread (a large set is a large file)."""
    document = {
        "format": FORMAT,
        "name": snapshot.name,
        "version": snapshot.version,
        "incarnation": incarnation,
        "confirmed_at": confirmed_at,
        "members": list(snapshot.members),
        "retired": sorted(snapshot.retired),
        "retirements": {value: list(info) for value, info in snapshot.retirements.items()},
        "scoped": snapshot.scoped,  # members are scope keys: only a set the policy scopes takes them back
    }
    write_atomically(path_for(folder, snapshot.name), orjson.dumps(document))


def load(folder: str, name: str) -> tuple[SetPayload, float] | None:
    """The saved copy of `name` and when its source last confirmed it, or None (absent or unreadable)."""
    path = path_for(folder, name)
    remove_leftovers(path)  # of saves a killed process left half-written
    try:
        document: dict[str, Any] = orjson.loads(read_file(path, SAVED_COPY_BYTES))
        if document.get("format") != FORMAT or document.get("name") != name:
            raise ValueError("not a snapshot of this set in this format")
        payload = SetPayload(
            name,
            int(document["version"]),
            tuple(document["members"]),
            tuple(document["retired"]),
            {value: Retirement(info[0], info[1]) for value, info in document["retirements"].items()},
            incarnation=str(document.get("incarnation", "")),  # absent in copies saved before incarnations
            scoped=document.get("scoped") is True,
        )
        return payload, float(document["confirmed_at"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        log.warning("value set %s: ignoring the saved copy %s: %s", name, path, error)
        return None
