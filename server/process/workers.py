"""`argwatch serve --workers N`: N gateway processes on one host sharing the Gateway port (SO_REUSEPORT).

The parent starts N copies of itself, each with `--workers 1` and its own
Admin and metrics ports (the given ports plus the worker's index), and a
replica id ending in `-w<index>`. The kernel spreads new connections over the
workers' listening sockets; gRPC sets SO_REUSEPORT on Linux by default, and
the workers ask for it explicitly.

Why one metrics endpoint per worker, not prometheus-client's multiprocess
mode: that mode keeps every value in mmap'd files written on each increment
(a cost on every call), and it cannot carry the gateway's own collectors:
the hot-path tallies, and the gauges computed at scrape time such as a value
set's age. A worker is simply one more target for Prometheus, and sums across
`instance` are correct.

Each worker keeps its decision log in its own folder under the one given
(w0, w1, ...: a file has one writer), with a share of the budget and the one
key the parent makes; `argwatch decisions` reads them merged by time.

Workers must agree on modes, so `--workers` above 1 needs `--redis` (the
shared mode store) and refuses `--mode-state` (one file, N writers). A
worker that exits unexpectedly stops the others and the parent exits
non-zero: restarting is the supervisor's job (systemd, Kubernetes), which
sees the failure instead of a half-running group.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from argwatch.server.decisions.packing import worker_folders
from argwatch.server.decisions.writer import KEY_FILE, adopt_files, kept_key
from argwatch.server.process.settings import Settings

log = logging.getLogger("argwatch.workers")

MAX_WORKERS = 64


def check_workers(settings: Settings) -> None:
    """Raises ValueError when --workers cannot work with the other settings."""
    if settings.workers <= 1:
        return
    if settings.workers > MAX_WORKERS:
        raise ValueError(f"--workers {settings.workers}: at most {MAX_WORKERS}")
    if not settings.redis:
        raise ValueError("--workers above 1 needs --redis: the workers must share one mode store")
    if settings.mode_state:
        raise ValueError("--workers above 1 cannot use --mode-state (one file, several writers): modes live in Redis")
    if settings.decision_log is not None:
        # Each worker keeps its share less a whole current file of rotated ones: under two files, it would delete
        # each file as it rotates it.
        share = settings.decision_log_max_bytes // settings.workers
        if 2 * settings.decision_log_rotate_bytes > share:
            raise ValueError(
                f"--decision-log-rotate-bytes {settings.decision_log_rotate_bytes}: more than half of each of the "
                f"{settings.workers} workers' share of --decision-log-max-bytes ({share}): each worker keeps its "
                "own log, a current file and at least one rotated one"
            )
    for flag, address in (("--listen", settings.listen), ("--admin-listen", settings.admin_listen),
                          ("--metrics-listen", settings.metrics_listen)):  # fmt: skip
        if address.rpartition(":")[2] == "0":
            raise ValueError(f"{flag} {address}: --workers needs fixed ports (the workers share or count up from them)")


def worker_arguments(argv: Sequence[str], settings: Settings, index: int) -> list[str]:
    """The command line of worker `index`: the parent's, then the worker's own ports and id (later flags win)."""
    return [
        *argv,
        "--workers", "1",
        "--listen", settings.listen,
        "--admin-listen", _plus(settings.admin_listen, index),
        "--metrics-listen", _plus(settings.metrics_listen, index),
        "--replica-id", f"{settings.replica_id}-w{index}",
        "--reuse-port", "true",
        *_decision_log_arguments(settings, index),
    ]  # fmt: skip


def _decision_log_arguments(settings: Settings, index: int) -> list[str]:
    """A worker's own decision-log folder under the parent's (a file has one writer: two would rotate it from
    under each other), a share of its budget, and the one key all of them hash with."""
    if settings.decision_log is None:
        return []
    folder = Path(settings.decision_log)
    return [
        "--decision-log", str(folder / f"w{index}"),
        "--decision-log-key", settings.decision_log_key or str(folder / KEY_FILE),
        "--decision-log-max-bytes", str(settings.decision_log_max_bytes // settings.workers),
    ]  # fmt: skip


def run_workers(argv: Sequence[str], settings: Settings) -> int:
    """Starts the workers and waits; SIGTERM, SIGINT and SIGHUP (reload) are passed to every worker."""
    command = [sys.executable, "-m", "argwatch.server.cli", *argv]
    if settings.decision_log is not None:
        _prepare_decision_log(settings)
    workers = [subprocess.Popen(worker_arguments(command, settings, index)) for index in range(settings.workers)]
    log.info("started %d workers: pids %s", len(workers), ", ".join(str(w.pid) for w in workers))
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signum)

    def hang_up(signum: int, _frame: object) -> None:
        for worker in workers:  # each worker reloads its policy (the file they share)
            if worker.poll() is None:
                worker.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hang_up)
    failed = 0
    while any(worker.poll() is None for worker in workers):
        for index, worker in enumerate(workers):
            code = worker.poll()
            if code is not None and code != 0 and not stopping:
                log.error("worker %d (pid %d) exited with %d: stopping the others", index, worker.pid, code)
                failed = code
                stop(signal.SIGTERM, None)
        time.sleep(0.2)
    codes = [worker.wait() for worker in workers]
    return failed or next((code for code in codes if code not in (0, -signal.SIGTERM, -signal.SIGINT)), 0)


def _prepare_decision_log(settings: Settings) -> None:
    """Before any worker starts: the key they all hash with (unless one is given), and the files no worker will
    write any more (the folder's own, of a single process before; those of workers beyond N) handed to the first
    worker's folder, whose budget ages them out."""
    assert settings.decision_log is not None
    folder = Path(settings.decision_log)
    first = folder / "w0"
    try:
        first.mkdir(parents=True, exist_ok=True)
        if settings.decision_log_key is None:
            kept_key(folder)
        beyond = [path for path in worker_folders(folder) if int(path.name[1:]) >= settings.workers]
        adopt_files(first, [folder, *beyond])
    except OSError as error:
        why = error.strerror or error
        raise ValueError(f"--decision-log {folder}: the directory cannot be written: {why}") from None


def _plus(address: str, offset: int) -> str:
    host, _, port = address.rpartition(":")
    return f"{host}:{int(port) + offset}"
