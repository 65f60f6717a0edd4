"""Issue 18.6: temporary files of writes a killed process interrupted are removed at the next start.

A SIGKILL between the temporary file's creation and its rename leaves
`.<file>.tmp-XXXX` beside the mode state file or a saved value set, and
before, nothing ever removed them: every killed compaction of a large audit
left one more. Only old leftovers of the same target are removed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import Mode
from argwatch.server.state.atomic_file import write_atomically
from argwatch.server.valuesets import persist

POLICY = parse_policy(b"tools: {refund_order: {mode: reject}}\n", "/p.yaml")


def leftover(folder: Path, target: str, suffix: str, age_seconds: float) -> Path:
    path = folder / f".{target}.tmp-{suffix}"
    path.write_bytes(b'{"version": 3, "snap')  # half a compaction, as a SIGKILL leaves it
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


def test_a_restarted_mode_store_removes_what_killed_compactions_left(tmp_path: Path) -> None:
    state = tmp_path / "modes.json"
    first = ModeStore(POLICY, state_file=str(state))
    first.set_mode("refund_order", Mode.OBSERVE, actor="ana", reason="INC-1")
    old = [leftover(tmp_path, "modes.json", f"k{n}", age_seconds=3600) for n in range(3)]
    recent = leftover(tmp_path, "modes.json", "now", age_seconds=1)  # perhaps a write in progress
    other = leftover(tmp_path, "other.json", "x", age_seconds=3600)  # another file's: not ours
    legacy = tmp_path / ".tmp-k2j3h4.json"  # as versions before named them
    legacy.write_bytes(b"{")
    os.utime(legacy, (time.time() - 3600, time.time() - 3600))

    again = ModeStore(POLICY, state_file=str(state))

    assert again.mode_for("refund_order") is Mode.OBSERVE  # the state itself is intact
    assert [path.exists() for path in old] == [False, False, False]
    assert recent.exists() and other.exists() and not legacy.exists()


def test_loading_a_saved_set_removes_its_leftovers(tmp_path: Path) -> None:
    target = Path(persist.path_for(str(tmp_path), "refunds.reason_codes"))
    write_atomically(str(target), b"{}")
    stale = leftover(tmp_path, target.name, "abc", age_seconds=3600)
    assert persist.load(str(tmp_path), "refunds.reason_codes") is None  # "{}" is not a snapshot: ignored
    assert not stale.exists() and target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # a write leaves nothing beside it
