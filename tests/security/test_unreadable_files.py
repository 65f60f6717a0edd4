"""A path that is not a regular file, or is too large, is refused at once; a read that hangs holds nothing.

The attack: with the policy path replaced by a FIFO, ReloadPolicy hung while
holding the reload lock, so every later reload and SIGHUP waited behind it,
`policy_reload_error` stayed empty, and SIGTERM logged "stopped" while the
process never exited. `replay --sets FIFO` and `coverage --policy FIFO` hung
too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from argwatch.common import files
from argwatch.common.files import FileRefused, open_regular, read_file
from argwatch.server.policy.loader import load_policy
from argwatch.server.process import reload
from tests.conftest import gateway_on

POLICY = """
    tools:
      refund_order:
        mode: reject
        schema: {type: object, properties: {note: {type: string}}, additionalProperties: false}
"""


def _fifo(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


def test_read_file_refuses_what_is_not_a_regular_file_or_is_too_large(tmp_path: Path) -> None:
    """A FIFO (no writer: it would block), a character device (endless), a directory, and a file over its cap are
    each refused at once, naming why; a file within its cap is read whole."""
    _fifo(tmp_path / "fifo")
    for path, why in ((tmp_path / "fifo", "a FIFO"), (Path("/dev/zero"), "a character device"), (tmp_path, "a dir")):
        with pytest.raises(FileRefused) as refused:
            read_file(str(path), files.MIB)
        assert "not a regular file" in str(refused.value.strerror) and why.split()[1] in str(refused.value.strerror)
    with pytest.raises(FileRefused):
        open_regular(str(tmp_path / "fifo"))
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(FileRefused, match="2048 bytes, over the 1024 bytes"):
        read_file(str(big), 1024)
    assert read_file(str(big), 2048) == b"x" * 2048


async def test_a_fifo_policy_is_refused_at_once_and_the_next_reload_and_the_stop_go_through(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    stopped = False
    try:
        policy = tmp_path / "policy.yaml"
        text = policy.read_text()
        _fifo(policy)
        refused = await asyncio.wait_for(gateway.reload(), 10)
        assert refused.outcome.startswith("refused") and "not a regular file (a FIFO)" in refused.outcome
        assert gateway.reloader is not None and "FIFO" in gateway.reloader.state.refused  # policy_reload_error
        policy.unlink()
        policy.write_text(text)
        assert (await asyncio.wait_for(gateway.reload(), 10)).outcome == "unchanged"  # the lock was not held
        await asyncio.wait_for(gateway.stop(0), 10)
        stopped = True
    finally:
        if not stopped:
            await gateway.stop(0)


async def test_a_read_that_hangs_is_refused_at_its_deadline_and_holds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy read stuck (a hung mount) is refused after LOAD_SECONDS; the lock is free for the next reload."""
    gateway = await gateway_on(tmp_path, POLICY)
    stuck = threading.Event()
    real_load = load_policy
    monkeypatch.setattr(reload, "LOAD_SECONDS", 0.3)
    monkeypatch.setattr(reload, "load_policy", lambda path, serving=None: stuck.wait())
    try:
        refused = await asyncio.wait_for(gateway.reload(), 10)
        assert "not read and validated within 0.3s" in refused.outcome
        monkeypatch.setattr(reload, "load_policy", real_load)
        assert (await asyncio.wait_for(gateway.reload(), 10)).outcome == "unchanged"
    finally:
        stuck.set()
        await gateway.stop(0)


def test_the_commands_refuse_a_fifo_instead_of_hanging(tmp_path: Path) -> None:
    """`argwatch replay --sets FIFO`, `coverage --policy FIFO`, `policy check FIFO` and `serve --policy FIFO` exit
    at once, naming the file."""
    argwatch = os.path.join(os.path.dirname(sys.executable), "argwatch")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "sources:\n  local: {file: sets.yaml}\nvalue_sets:\n  s: {source: local}\n"
        "tools:\n  t:\n    arguments:\n      a: {value_set: s}\n"
    )
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("")
    _fifo(tmp_path / "fifo")
    fifo = str(tmp_path / "fifo")
    for command in (
        ["replay", "--policy", str(policy), "--sets", fifo, "--wait", "1s", str(corpus)],
        ["coverage", "--policy", fifo],
        ["policy", "check", fifo],
        ["serve", "--policy", fifo, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
    ):
        started = time.monotonic()
        done = subprocess.run([argwatch, *command], capture_output=True, text=True, timeout=60)
        assert done.returncode != 0, command
        assert "not a regular file" in done.stdout + done.stderr, (command, done.stdout, done.stderr)
        assert time.monotonic() - started < 60


@pytest.mark.e2e
def test_sigterm_ends_the_process_after_a_reload_of_a_fifo(tmp_path: Path) -> None:
    """Before: SIGHUP with the policy a FIFO, then SIGTERM logged "stopped" and the process never exited."""
    argwatch = os.path.join(os.path.dirname(sys.executable), "argwatch")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with subprocess.Popen(
        [argwatch, "serve", "--policy", str(policy), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    ) as gateway:
        try:
            assert gateway.stderr is not None
            for line in gateway.stderr:
                if "serving policy" in line:
                    break
            _fifo(policy)
            gateway.send_signal(signal.SIGHUP)
            for line in gateway.stderr:
                if "policy reload refused" in line:
                    assert "not a regular file (a FIFO)" in line
                    break
            gateway.send_signal(signal.SIGTERM)
            assert gateway.wait(timeout=15) == 0
        finally:
            if gateway.poll() is None:
                gateway.kill()
