"""The decision log's writer: a bounded queue of lines the event loop appends to, drained by one thread into
files packed (zstd) as they are written, that rotate by size and age and are kept within a total byte budget.

The event loop's side is `offer`: the line composed (one C call, record.py), an
append to a deque, no lock held while anything is written. The queue holds
finished lines, bounded in count and in bytes, never the call or its verdict:
a stalled disk keeps at most QUEUE_BYTES, whatever the callers sent. A full
queue drops the line and counts it (reason `queue_full`); a write that fails
drops the line and counts it (reason `write_error`), and the next line tries
again. Validate never waits on either.
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import zstandard

from argwatch.common.files import SMALL_FILE_BYTES, read_file
from argwatch.server.decisions.packing import (
    PACKED_SUFFIX,
    WORKER_FOLDER,
    pack,
    packed_bound,
    packer,
    rotated_files,
    rotated_oldest_first,
    seal,
    worker_folders,
)
from argwatch.server.decisions.record import LineBuilder, ValueHasher
from argwatch.server.decisions.value_plan import ValuePlan
from argwatch.server.modes.document import ModeDocument
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall

log = logging.getLogger("argwatch.decisions")

# The file being written: one zstd frame, a block flushed per batch (read it with `argwatch decisions`).
CURRENT = "decisions.jsonl.zst"
# The plain current file of an earlier release: packed and rotated at the next start, read until then.
PLAIN_CURRENT = "decisions.jsonl"
KEY_FILE = ".hmac-key"
# The fixed reasons of argwatch_decision_log_dropped_total.
QUEUE_FULL = "queue_full"
WRITE_ERROR = "write_error"
DROP_REASONS = (QUEUE_FULL, WRITE_ERROR)
# A failing write is logged at most this often (each is counted).
WARN_EVERY_SECONDS = 60.0
# How long a line may wait in the queue for its batch: what `decisions tail -f` lags by, at most.
BATCH_SECONDS = 0.1
# The queue's lines in bytes, at most (besides `--decision-log-queue` lines): a line is about 1 KiB, and one of
# many arguments, problems or clear values up to a few hundred KiB.
QUEUE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class LogLimits:
    """How big the log may grow: per file before it rotates, in total, and how old a file gets."""

    max_bytes: int  # the directory's budget: the current file and every rotated one
    rotate_bytes: int
    rotate_seconds: float
    queue: int  # lines waiting for the writer before new ones are dropped


class DecisionLogWriter:
    """A started writer thread and its queue; `offer` from the event loop, `close` once at shutdown."""

    enabled = True

    def __init__(
        self,
        directory: Path,
        limits: LogLimits,
        hasher: ValueHasher,
        dropped: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.time,
        forward: Callable[[bytes], None] | None = None,
    ) -> None:
        """`forward`, when given, is handed each line on the writer's thread before it is written (the OTLP
        export, argwatch.server.tracing); it must not raise."""
        self._dir = directory
        self._forward = forward
        self._limits = limits
        self._build = LineBuilder(hasher).line
        self._dropped = dropped
        self._clock = clock
        self._queue: collections.deque[bytes] = collections.deque()
        # The bytes queued, as two counts each written by one thread only (the loop's, the writer's): no lock,
        # and no update lost between the threads.
        self._offered = 0
        self._taken = 0
        self._wake = threading.Event()
        self._limit = limits.queue
        self._wake_at = max(1, limits.queue // 4)
        self._closing = False
        self._gate = threading.Lock()  # held by the thread while it writes a batch; `held` stalls it (tests)
        self._file: IO[bytes] | None = None
        self._packer: zstandard.ZstdCompressionObj | None = None
        self._size = 0  # the current file's bytes on disk
        self._unflushed = 0  # plain bytes fed to its frame since its last block was flushed
        self._unflushed_lines = 0  # and their lines: lost with the frame's state if a write then fails
        self._handed = 0  # lines handed to the OS in this batch, counted in `written` as it ends
        self._opened_at = 0.0
        self._seq = 0
        self.written = 0  # lines handed to the OS, counted once their batch is done (tests, benches, status)
        self.busy_seconds = 0.0  # the writer's thread's CPU time writing and packing (bench/decision_log.py)
        self._warned_at = -WARN_EVERY_SECONDS
        self._thread = threading.Thread(target=self._run, name="argwatch-decision-log", daemon=True)
        self._thread.start()

    def offer(
        self, at_ns: int, call: ToolCall, verdict: Verdict, modes: ModeDocument, latency_ns: int, plan: ValuePlan
    ) -> None:
        """Composes the decided call's line and queues it; drops and counts it when the writer is `queue` lines
        or QUEUE_BYTES behind."""
        queue = self._queue
        waiting = len(queue)
        if waiting >= self._limit or self._offered - self._taken >= QUEUE_BYTES:
            self._dropped(QUEUE_FULL)
            return
        try:
            line = self._build(at_ns, call, verdict, modes, latency_ns, plan)
        except Exception as error:  # a value the line cannot hold: this line is lost, counted
            self._failed(error)
            return
        queue.append(line)
        self._offered += len(line)
        # The writer wakes on its own every BATCH_SECONDS; it is woken early only when the queue fills up. Waking
        # it per line cost a thread switch and a write per line, several times what the line itself costs.
        if waiting >= self._wake_at and not self._wake.is_set():
            self._wake.set()

    def write_now(self) -> None:
        """Wakes the writer to write what is queued now rather than at its next tick (benches, shutdown)."""
        self._wake.set()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Stalls the writer while inside (what a hung disk does): lines queue, then drop."""
        with self._gate:
            yield

    def close(self, timeout: float = 5.0) -> None:
        """Writes what is queued, ends the current file's frame, fsyncs and closes it (the next start rotates it)."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("the decision log's writer is stuck; %d lines were not written", len(self._queue))

    def _run(self) -> None:
        while True:
            self._wake.wait(timeout=BATCH_SECONDS)
            self._wake.clear()
            with self._gate:
                started = time.thread_time()
                self._write_batch()
                if self._file is not None and self._clock() - self._opened_at >= self._limits.rotate_seconds:
                    self._guarded(self._rotate)
                self.busy_seconds += time.thread_time() - started
                # Last: a bench or test that waits for `written` finds the batch's CPU counted and its lines read.
                self.written += self._handed
                self._handed = 0
            if self._closing and not self._queue:
                self._guarded(self._close_file)
                self.written += self._handed
                return

    def _write_batch(self) -> None:
        """Writes every queued line, then hands the frame's block to the OS: a crash of the process then loses
        nothing written, and `decisions tail --follow` sees each line within a poll (an fsync waits for
        rotation). In one write when the lines fit the current file, else a run at a time (a run ends where the
        file rotates)."""
        popleft = self._queue.popleft
        lines = [popleft() for _ in range(len(self._queue))]  # one at a time: the loop may append meanwhile
        size = sum(map(len, lines))
        try:
            if lines:
                self._write_lines(lines, size)
            self._guarded(self._flush_block)
            self._guarded(self._check_still_there)
        finally:
            # Counted out only once handed to the OS or dropped: a write that hangs (a stuck disk) still holds
            # these lines, so the loop must not queue another QUEUE_BYTES beside them.
            self._taken += size

    def _write_lines(self, lines: list[bytes], size: int) -> None:
        forward = self._forward
        if forward is not None:
            for line in lines:
                forward(line)  # before the file: a line the disk refuses still goes out
        if self._file is None:
            try:
                self._open()  # the current file's size is what rotation is judged by
            except OSError:
                self._write_run(lines, size)  # tried once more there; counted if it fails again
                return
        if self._fits(size):
            self._write_run(lines, size)
            return
        run: list[bytes] = []
        run_bytes = 0
        for line in lines:
            if not self._fits(run_bytes + len(line)):
                # Before the line, not after: the current file stays within rotate_bytes (a lone longer line
                # excepted), which is the room the budget keeps for it. What the frame holds unflushed is
                # counted at its most (as if it did not shrink), so the block is flushed first to know.
                self._write_run(run, run_bytes)
                run, run_bytes = [], 0
                self._guarded(self._flush_block)
                if self._size and not self._fits(len(line)):
                    self._guarded_rotate()
            run.append(line)
            run_bytes += len(line)
        self._write_run(run, run_bytes)

    def _fits(self, more: int) -> bool:
        """Whether `more` plain bytes surely fit the current file within rotate_bytes, packed."""
        return self._size + packed_bound(self._unflushed + more) <= self._limits.rotate_bytes

    def _write_run(self, run: list[bytes], size: int) -> None:
        if not run:
            return
        try:
            if self._file is None:
                self._open()
            assert self._file is not None and self._packer is not None
            packed = self._packer.compress(b"".join(run))
            self._write_all(packed)
            self._unflushed += size
            self._unflushed_lines += len(run)
        except Exception as error:  # a full disk, a removed directory: these lines are lost, counted
            for _ in run:
                self._dropped(WRITE_ERROR)
            self._warn(error)
            self._abandon_file()

    def _guarded_rotate(self) -> None:
        try:
            self._rotate()
            self._open()
        except Exception as error:
            self._warn(error)
            self._abandon_file()

    def _failed(self, error: Exception) -> None:
        self._dropped(WRITE_ERROR)
        self._warn(error)

    def _warn(self, error: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_SECONDS:  # counted every time; said once a minute at most
            self._warned_at = now
            log.warning("decision log: a line was not written (more are counted, not logged): %s", error)

    def _open(self) -> None:
        """Starts a new current file, one frame. A current file found (an earlier start's, or this one's after a
        failed write) is rotated first, its frame sealed if it was left open: a frame cannot be appended to."""
        self._retire_leftovers()
        path = self._dir / CURRENT
        # Unbuffered: a flushed block is handed to the OS by its own write, and a failed write is seen at once.
        self._file = open(path, "wb", buffering=0)  # noqa: SIM115 (held open across writes, closed at rotation)
        self._packer = packer()
        self._size = self._unflushed = 0
        self._opened_at = self._clock()

    def _retire_leftovers(self) -> None:
        if retire_current_files(self._dir, self._rotated_name):
            self._keep_budget()

    def _write_all(self, packed: bytes) -> None:
        """Writes `packed` to the current file (a short write is continued: a disk nearly full)."""
        assert self._file is not None
        view = memoryview(packed)
        while view:
            view = view[self._file.write(view) :]
        self._size += len(packed)

    def _check_still_there(self) -> None:
        """Whether the file written is still in the folder: one removed under the writer (the folder deleted, a
        lost mount, an operator's clean-up) takes every write without an error, into a file no one can read.
        Once a batch: this batch's lines are then counted lost, and the next batch opens a new file."""
        if self._file is None or os.fstat(self._file.fileno()).st_nlink > 0:
            return
        lost, self._handed = self._handed, 0
        for _ in range(lost):
            self._dropped(WRITE_ERROR)
        self._warn(OSError(f"{self._dir / CURRENT} was removed while it was written"))
        self._abandon_file()

    def _flush_block(self) -> None:
        """Hands what the frame holds to the OS as a block ended, so that every line of it can be read."""
        if self._file is None or self._packer is None or not self._unflushed:
            return
        self._write_all(self._packer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
        self._handed += self._unflushed_lines
        self._unflushed = self._unflushed_lines = 0

    def _close_file(self) -> None:
        if self._file is None:
            return
        if self._packer is not None and self._size + self._unflushed:  # an empty file is left empty, not a frame
            self._write_all(self._packer.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
            self._handed += self._unflushed_lines
            self._unflushed = self._unflushed_lines = 0
        self._packer = None
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None

    def _abandon_file(self) -> None:
        """After a failed write: the file is closed without caring whether that fails too; the next line opens a
        new one (the next `_open` seals and rotates this one)."""
        handle, self._file, self._packer = self._file, None, None
        # Lines the frame held unflushed are lost with its state: counted (a few may yet be in a whole block
        # the seal keeps, so the count errs high, never low).
        lost, self._unflushed_lines, self._unflushed = self._unflushed_lines, 0, 0
        for _ in range(lost):
            self._dropped(WRITE_ERROR)
        if handle is not None:
            with suppress(OSError):
                handle.close()

    def _rotate(self) -> None:
        """Ends the current file's frame, fsyncs and closes it, renames it to a name that sorts by time, then
        keeps the budget."""
        if self._file is None:  # abandoned after a failed write: its frame is sealed where it stopped
            self._retire_leftovers()
            return
        self._close_file()
        if retire_current_files(self._dir, self._rotated_name, ended=True):
            self._keep_budget()

    def _rotated_name(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self._clock()))
        while True:  # a file of an earlier process may have the same second and number: never replace it
            self._seq += 1
            target = self._dir / f"decisions-{stamp}-{self._seq:06d}{PACKED_SUFFIX}"
            if not target.exists():
                return target

    def _keep_budget(self) -> None:
        """Deletes the oldest rotated files until they fit the budget less the room of a whole current file,
        so that the folder stays within the budget as the current file grows to its rotation size."""
        rotated = rotated_oldest_first(self._dir)
        total = sum(size for _, size in rotated)
        keep = self._limits.max_bytes - self._limits.rotate_bytes
        for path, size in rotated:
            if total <= keep:
                break
            path.unlink(missing_ok=True)
            total -= size

    def _guarded(self, step: Callable[[], None]) -> None:
        try:
            step()
        except OSError as error:
            log.warning("decision log: %s", error)
            self._abandon_file()


def open_decision_log(
    directory: str,
    limits: LogLimits,
    dropped: Callable[[str], None],
    *,
    key_file: str | None = None,
    clock: Callable[[], float] = time.time,
    forward: Callable[[bytes], None] | None = None,
) -> DecisionLogWriter:
    """Checks the directory can be written (creating it if missing) and starts the writer; raises ValueError
    saying why not, so that the gateway refuses to start rather than lose every line."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".argwatch-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"--decision-log {directory}: the directory cannot be written: {error.strerror or error}"
        ) from None
    hasher = ValueHasher(_key(path, key_file))
    adopt_files(path, worker_folders(path))  # an earlier `serve --workers` on this folder: now this process's
    return DecisionLogWriter(path, limits, hasher, dropped, clock=clock, forward=forward)


def retire_current_files(folder: Path, rotated_name: Callable[[], Path], *, ended: bool = False) -> bool:
    """Turns the folder's current files, which no writer has open, into rotated ones named by `rotated_name`: an
    earlier release's plain one packed, this release's frame sealed where its writer stopped (unless `ended`:
    the writer closed it itself), an empty one removed. Returns whether a file was added."""
    added = False
    plain = folder / PLAIN_CURRENT
    if plain.exists():
        target = rotated_name()
        partial = target.with_name(target.name + ".partial")
        pack(plain, partial)
        os.replace(partial, target)
        plain.unlink()
        added = True
    current = folder / CURRENT
    if not current.exists():
        return added
    if current.stat().st_size == 0:  # opened, never written (a stop right after a rotation)
        current.unlink()
        return added
    if not ended:
        seal(current)
    os.replace(current, rotated_name())
    return True


def adopt_files(target: Path, sources: list[Path]) -> None:
    """Moves the decision-log files of folders no writer has any more into `target`, whose writer then ages them
    out within its budget with its own: a folder split among workers (`serve --workers`), or workers fewer than
    before, would otherwise keep files that no budget counts. A current file is sealed first, a plain one
    packed; a worker's folder left empty is removed. Raises OSError when the files cannot be moved."""
    for source in sources:
        for rotated in rotated_files(source):
            os.replace(rotated, _free_name(target, rotated.name))
        retire_current_files(source, lambda: _free_name(target, "decisions-adopted" + PACKED_SUFFIX))
        if WORKER_FOLDER.fullmatch(source.name):
            with suppress(OSError):  # a worker's folder: gone once empty (the key is the log's, above it)
                source.rmdir()


def _free_name(folder: Path, name: str) -> Path:
    """`name` in `folder`, or with a number added before its suffix when that is taken: never replaced."""
    stem, dot, suffix = name.partition(".")
    path, number = folder / name, 0
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}{dot}{suffix}"
    return path


def _key(directory: Path, key_file: str | None) -> bytes:
    """The deployment's MAC key: from `key_file` (a mounted Secret), else one made on first start and kept in
    the directory (0600), so that digests stay comparable across restarts."""
    path = key_file or str(directory / KEY_FILE)
    try:
        if not key_file:
            kept_key(directory)
        return read_file(path, SMALL_FILE_BYTES).strip()
    except OSError as error:
        raise ValueError(f"--decision-log-key {path}: {error.strerror or error}") from None


def kept_key(directory: Path) -> Path:
    """The key kept in the folder, made if there is none: written aside (0600) and linked into place, so that
    processes starting at once (`serve --workers`) all read the one key that won, never a half-written one."""
    kept = directory / KEY_FILE
    if kept.exists():
        return kept
    key = secrets.token_hex(32).encode()
    descriptor, aside = tempfile.mkstemp(dir=directory, prefix=KEY_FILE + ".")  # 0600
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(aside, kept)
        except FileExistsError:  # another process made it first: theirs is the key
            pass
        except OSError:  # a filesystem without hard links (vfat, some network shares): created in place
            with (
                suppress(FileExistsError),
                os.fdopen(os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as made,
            ):
                made.write(key)
    finally:
        os.unlink(aside)
    return kept
