"""The decision log's folder as operators change it: workers more or fewer than before, a folder removed under
the writer, a filesystem without hard links, a zeroed tail after a power loss. Real writers, real files."""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import zstandard

from argwatch.server.decisions import writer as writer_module
from argwatch.server.decisions.packing import packer, rotated_files, seal
from argwatch.server.decisions.reader import LineFilter, ReadCounts, follow, read_lines
from argwatch.server.decisions.record import ValueHasher
from argwatch.server.decisions.writer import KEY_FILE, DecisionLogWriter, LogLimits, open_decision_log
from argwatch.server.process.settings import Settings
from argwatch.server.process.workers import _prepare_decision_log, check_workers


def _writer(folder: Path, max_bytes: int, rotate_bytes: int) -> tuple[DecisionLogWriter, list[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    dropped: list[str] = []
    limits = LogLimits(max_bytes, rotate_bytes, 3600.0, 100_000)
    return DecisionLogWriter(folder, limits, ValueHasher(b"k" * 32), dropped.append), dropped


def _line(n: int) -> bytes:
    # Random bytes as hex: lines that pack to about half, so that files rotate.
    return (
        orjson.dumps(
            {"ts": float(n), "call_id": f"c{n}", "tool": "t", "decision": "allow", "pad": os.urandom(100).hex()}
        )
        + b"\n"
    )


def _write(writer: DecisionLogWriter, numbers: range) -> None:
    """Lines handed to the writer as `offer` queues them, then written; returns once they are."""
    for n in numbers:
        line = _line(n)
        writer._queue.append(line)
        writer._offered += len(line)
    target = writer.written + len(numbers)
    writer.write_now()
    _until(lambda: writer.written >= target)


def _until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition did not hold in time"
        time.sleep(0.02)


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("decisions*") if path.is_file())


def _settings(folder: Path, workers: int, max_bytes: int, rotate_bytes: int) -> Settings:
    return Settings(
        policy="policy.yaml", workers=workers, redis="redis://127.0.0.1:1", listen="127.0.0.1:50999",
        admin_listen="127.0.0.1:51000", metrics_listen="127.0.0.1:51010", decision_log=str(folder),
        decision_log_max_bytes=max_bytes, decision_log_rotate_bytes=rotate_bytes,
    )  # fmt: skip


def test_files_no_worker_writes_any_more_are_handed_to_the_first_and_aged_out_within_the_budget(
    tmp_path: Path,
) -> None:
    """A single process, then 4 workers, then 2, on one folder: the folder's own files and w2-w3's go to w0,
    every line stays readable, and w0's budget ages them out first: the folder stays within the budget."""
    budget, rotate = 1 << 20, 64 << 10
    single, _ = _writer(tmp_path, budget, rotate)
    _write(single, range(0, 3000))
    single.close()
    _prepare_decision_log(_settings(tmp_path, 4, budget, rotate))
    assert not rotated_files(tmp_path) and rotated_files(tmp_path / "w0")  # handed to w0
    for index in range(4):
        worker, _ = _writer(tmp_path / f"w{index}", budget // 4, rotate)
        _write(worker, range(10_000 * (index + 1), 10_000 * (index + 1) + 1000))
        worker.close()
    before = sum(1 for _ in read_lines(tmp_path, LineFilter(), ReadCounts()))
    _prepare_decision_log(_settings(tmp_path, 2, budget, rotate))
    assert not (tmp_path / "w2").exists() and not (tmp_path / "w3").exists()
    assert sum(1 for _ in read_lines(tmp_path, LineFilter(), ReadCounts())) == before  # moved, none lost
    for index in range(2):
        worker, _ = _writer(tmp_path / f"w{index}", budget // 2, rotate)
        _write(worker, range(100_000 * (index + 1), 100_000 * (index + 1) + 6000))
        worker.close()
    assert _size(tmp_path) <= budget


def test_a_single_process_takes_back_the_workers_files(tmp_path: Path) -> None:
    worker, _ = _writer(tmp_path / "w1", 1 << 30, 64 << 20)
    _write(worker, range(5))
    worker.close()
    single = open_decision_log(str(tmp_path), LogLimits(1 << 30, 64 << 20, 3600.0, 100), lambda reason: None)
    single.close()
    assert not (tmp_path / "w1").exists() and len(rotated_files(tmp_path)) == 1
    assert [line["call_id"] for line in read_lines(tmp_path, LineFilter(), ReadCounts())] == [f"c{n}" for n in range(5)]


def test_a_share_that_cannot_keep_a_rotated_file_is_refused(tmp_path: Path) -> None:
    """16 workers on the default 1 GiB rotating at 64 MiB would each delete every file as it rotates it."""
    with pytest.raises(ValueError, match="more than half of each of the 16 workers' share"):
        check_workers(_settings(tmp_path, 16, 1 << 30, 64 << 20))
    with pytest.raises(ValueError, match="at most half of --decision-log-max-bytes"):
        _settings(tmp_path, 1, 64 << 20, 64 << 20)


def test_lines_written_into_a_removed_folder_are_counted_lost(tmp_path: Path) -> None:
    folder = tmp_path / "log"
    writer, dropped = _writer(folder, 1 << 30, 64 << 20)
    try:
        _write(writer, range(10))
        shutil.rmtree(folder)  # a lost mount, say: writes to the open file keep succeeding
        for n in range(100, 1100):
            writer._queue.append(_line(n))
        writer.write_now()
        _until(lambda: len(dropped) >= 1000)
        assert set(dropped) == {"write_error"} and writer.written == 10
    finally:
        writer.close()


def test_the_key_is_made_on_a_filesystem_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(source: object, target: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    writer = open_decision_log(str(tmp_path), LogLimits(1 << 30, 64 << 20, 3600.0, 100), lambda reason: None)
    writer.close()
    assert len((tmp_path / KEY_FILE).read_bytes()) == 64 and (tmp_path / KEY_FILE).stat().st_mode & 0o077 == 0
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(KEY_FILE + ".")] == []  # no leftovers


def test_a_zeroed_tail_is_cut_off_at_once(tmp_path: Path) -> None:
    """Some filesystems leave zeros where unsynced data was after a power loss: read as three-byte empty blocks
    it took seconds a few MiB; it is now found in one read and cut off."""
    path = tmp_path / writer_module.CURRENT
    frame = packer()
    lines = b"".join(_line(n) for n in range(50))
    written = frame.compress(lines) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    path.write_bytes(written + bytes(64 << 20))
    started = time.process_time()
    seal(path)
    assert time.process_time() - started < 1.0  # a bound far above it (about 0.1 s), far below the old walk's
    assert zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes()) == lines


def test_follow_reads_a_workers_folder_made_after_it_started(tmp_path: Path) -> None:
    polls = iter(range(200))
    seen = follow(
        tmp_path,
        LineFilter(),
        ReadCounts(),
        keep_going=lambda: next(polls, None) is not None,
        sleep=lambda _: time.sleep(0.02),
    )
    worker, _ = _writer(tmp_path / "w0", 1 << 30, 64 << 20)
    try:
        _write(worker, range(3))
        assert [line["call_id"] for line in seen] == ["c0", "c1", "c2"]
    finally:
        worker.close()


def test_an_empty_current_file_is_removed_not_handed_on_as_a_damaged_one(tmp_path: Path) -> None:
    """A writer stopped right after a rotation leaves an empty current file: it holds no frame, and handed to
    another folder as a rotated file it would read as cut short."""
    (tmp_path / "w1").mkdir()
    (tmp_path / "w1" / writer_module.CURRENT).write_bytes(b"")
    writer_module.adopt_files(tmp_path, [tmp_path / "w1"])
    counts = ReadCounts()
    assert list(read_lines(tmp_path, LineFilter(), counts)) == [] and counts.unreadable_files == []
    assert not rotated_files(tmp_path) and not (tmp_path / "w1").exists()
