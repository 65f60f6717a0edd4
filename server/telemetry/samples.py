"""The sampled log of offending values: the only place a value the model wrote is recorded.

One JSON object per line (timestamp, tool, argument, set, value truncated,
conversation id, call id, model, code, shape), for 1 in N offending values. Records go
through the standard logging machinery on the "argwatch.samples" logger; the
command line attaches a queue-backed handler so writing never blocks a call.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import random
import sys
import time
from collections.abc import Callable

import orjson

from argwatch.server.verdict.findings import Problem

SAMPLES_LOGGER = "argwatch.samples"


class SampledValueLog:
    """Decides which offending values to record, and records them."""

    def __init__(
        self,
        rate: float,
        max_value_chars: int,
        *,
        logger: logging.Logger | None = None,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._rate = rate
        self._max = max_value_chars
        self._logger = logger or logging.getLogger(SAMPLES_LOGGER)
        self._rng = rng
        self._clock = clock

    def offer(self, tool: str, problem: Problem, conversation_id: str, call_id: str, model: str = "") -> None:
        """Records the problem's value with probability `rate`."""
        if self._rate <= 0 or self._rng() >= self._rate:
            return
        value = problem.value
        if len(value) > self._max:
            value = value[: self._max - 1] + "…"
        record = {
            "ts": round(self._clock(), 3),
            "tool": tool[: self._max],
            "argument": problem.argument[: self._max],  # an invented key is model text too
            "set": problem.value_set,
            "code": problem.code.value,
            "shape": problem.shape.value,
            "value": value,
            "conversation_id": conversation_id[: self._max],
            "call_id": call_id[: self._max],
            "model": model[: self._max],
        }
        # orjson escapes control characters and emits valid UTF-8 whatever the model wrote.
        self._logger.info(orjson.dumps(record).decode())


def attach_sample_sink(path: str | None) -> Callable[[], None]:
    """Sends sampled records to `path` (or stdout when None or "-") through a background thread.

    Returns a function that flushes and detaches the sink.
    """
    if path in (None, "-"):
        target: logging.Handler = logging.StreamHandler(sys.stdout)
    else:
        # delay: the file is opened by the writer thread on the first record, so a sink that
        # blocks even on open (a FIFO nobody reads, a hung network mount) never blocks start-up.
        target = logging.FileHandler(path, encoding="utf-8", delay=True)
    target.setFormatter(logging.Formatter("%(message)s"))
    records: queue.Queue[logging.LogRecord] = queue.Queue(maxsize=10_000)
    listener = _Listener(records, target)
    handler = _DroppingQueueHandler(records)
    logger = logging.getLogger(SAMPLES_LOGGER)
    logger.setLevel(logging.INFO)
    propagated = logger.propagate
    logger.propagate = False
    logger.addHandler(handler)
    listener.start()

    def detach() -> None:
        logger.removeHandler(handler)
        logger.propagate = propagated  # as it was: a later sink, or a test's log capture, sees the records
        try:
            listener.stop()
        except queue.Full:  # the writer is stuck (a sink that never takes anything): leave it
            logging.getLogger(__name__).warning(
                "the sample log's writer is stuck; %d records were not written", records.qsize()
            )
            return
        target.close()

    return detach


STOP_WAIT_SECONDS = 5.0


class _Listener(logging.handlers.QueueListener):
    """A queue listener whose stop waits a while for room, instead of raising, when the queue is full."""

    def enqueue_sentinel(self) -> None:
        self.queue.put(self._sentinel, timeout=STOP_WAIT_SECONDS)  # type: ignore[attr-defined]


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """A queue handler that drops a record rather than block when the writer falls behind, and counts it."""

    dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            _DroppingQueueHandler.dropped += 1


def dropped_sample_records() -> int:
    """Sampled records dropped because the sink fell 10,000 records behind (argwatch_sample_log_dropped_total)."""
    return _DroppingQueueHandler.dropped
