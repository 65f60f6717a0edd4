"""The decision log's writer: a bounded queue of lines the event loop appends to, drained by one thread into
files that rotate by size and age, are packed (zstd) once rotated, and are kept within a total byte budget.

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
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from argwatch.common.files import SMALL_FILE_BYTES, read_file
from argwatch.server.decisions.packing import PACKED_SUFFIX, pack, rotated_oldest_first
from argwatch.server.decisions.record import LineBuilder, ValueHasher
from argwatch.server.decisions.value_plan import ValuePlan
from argwatch.server.modes.document import ModeDocument
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall

log = logging.getLogger("argwatch.decisions")

CURRENT = "decisions.jsonl"
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
        self._size = 0
        self._opened_at = 0.0
        self._seq = 0
        self.written = 0  # lines written, for tests and the status
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
        """Writes what is queued, fsyncs and closes the current file (it is not rotated: the next start appends)."""
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
                if self._queue:
                    self._write_queued()
                # Handed to the OS once a batch is written: a crash of the process then loses nothing written,
                # and `decisions tail --follow` sees each line within a poll (an fsync waits for rotation).
                self._guarded(self._flush)
                if self._file is not None and self._clock() - self._opened_at >= self._limits.rotate_seconds:
                    self._guarded(self._rotate)
                self.busy_seconds += time.thread_time() - started
            if self._closing and not self._queue:
                self._guarded(self._close_file)
                return

    def _write_queued(self) -> None:
        """Writes every queued line: in one write when they fit the current file, else a run at a time (a run
        ends where the file rotates)."""
        popleft = self._queue.popleft
        lines = [popleft() for _ in range(len(self._queue))]  # one at a time: the loop may append meanwhile
        size = sum(map(len, lines))
        try:
            self._write_lines(lines, size)
        finally:
            # Counted out only once written or dropped: a write that hangs (a stuck disk) still holds these
            # lines, so the loop must not queue another QUEUE_BYTES beside them.
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
        if self._size + size <= self._limits.rotate_bytes:
            self._write_run(lines, size)
            return
        run: list[bytes] = []
        run_bytes = 0
        for line in lines:
            if self._size + run_bytes and self._size + run_bytes + len(line) > self._limits.rotate_bytes:
                # Before the line, not after: the current file stays within rotate_bytes (a lone longer line
                # excepted), which is the room the budget keeps for it.
                self._write_run(run, run_bytes)
                self._guarded_rotate()
                run, run_bytes = [], 0
            run.append(line)
            run_bytes += len(line)
        self._write_run(run, run_bytes)

    def _write_run(self, run: list[bytes], size: int) -> None:
        if not run:
            return
        try:
            if self._file is None:
                self._open()
            assert self._file is not None
            self._file.write(b"".join(run))
            self._size += size
            self.written += len(run)
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
        path = self._dir / CURRENT
        self._file = open(path, "ab")  # noqa: SIM115 (held open across writes, closed at rotation)
        self._size = self._file.tell()
        self._opened_at = self._clock()

    def _flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def _close_file(self) -> None:
        if self._file is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None

    def _abandon_file(self) -> None:
        """After a failed write: the file is closed without caring whether that fails too; the next line reopens."""
        handle, self._file = self._file, None
        if handle is not None:
            with suppress(OSError):
                handle.close()

    def _rotate(self) -> None:
        """fsyncs and closes the current file, packs it under a name that sorts by time, then keeps the budget."""
        self._close_file()
        current = self._dir / CURRENT
        if not current.exists() or current.stat().st_size == 0:
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self._clock()))
        while True:  # a file of an earlier process may have the same second and number: never replace it
            self._seq += 1
            target = self._dir / f"decisions-{stamp}-{self._seq:06d}{PACKED_SUFFIX}"
            if not target.exists():
                break
        partial = target.with_name(target.name + ".partial")
        pack(current, partial)
        os.replace(partial, target)
        current.unlink()
        self._keep_budget()

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
    return DecisionLogWriter(path, limits, ValueHasher(_key(path, key_file)), dropped, clock=clock, forward=forward)


def _key(directory: Path, key_file: str | None) -> bytes:
    """The deployment's MAC key: from `key_file` (a mounted Secret), else one made on first start and kept in
    the directory (0600), so that digests stay comparable across restarts."""
    if key_file:
        path = key_file
    else:
        kept = directory / KEY_FILE
        path = str(kept)
        if not kept.exists():
            descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(secrets.token_hex(32).encode())
    try:
        return read_file(path, SMALL_FILE_BYTES).strip()
    except OSError as error:
        raise ValueError(f"--decision-log-key {path}: {error.strerror or error}") from None
