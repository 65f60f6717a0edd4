"""The sampled log: 1 in N offending values as one valid JSON object per line, whatever the model wrote."""

from __future__ import annotations

import logging

import orjson
import pytest

from argwatch.server.telemetry.samples import SampledValueLog, attach_sample_sink
from argwatch.server.verdict.findings import Problem, ProblemCode, Shape


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def problem(value: str) -> Problem:
    return Problem(
        code=ProblemCode.OUT_OF_SET,
        message="m",
        argument="reason_code",
        value_set="refunds.reason_codes",
        shape=Shape.INVENTED,
        value=value,
    )


@pytest.fixture
def collected() -> tuple[logging.Logger, _Collect]:
    logger = logging.getLogger("argwatch.samples.test")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = _Collect()
    logger.addHandler(handler)
    return logger, handler


def test_one_in_n_is_sampled_by_the_injected_rng(collected: tuple[logging.Logger, _Collect]) -> None:
    logger, handler = collected
    rolls = iter([0.5, 0.01, 0.3, 0.019, 0.02])
    log = SampledValueLog(0.02, 200, logger=logger, rng=lambda: next(rolls), clock=lambda: 1700000000.0)
    for _ in range(5):
        log.offer("refund_order", problem('"OTHER"'), "conv-1", "call-1", "gpt-4.1-mini")
    assert len(handler.lines) == 2
    record = orjson.loads(handler.lines[0])
    assert record == {
        "ts": 1700000000.0,
        "tool": "refund_order",
        "argument": "reason_code",
        "set": "refunds.reason_codes",
        "code": "out_of_set",
        "shape": "invented",
        "value": '"OTHER"',
        "conversation_id": "conv-1",
        "call_id": "call-1",
        "model": "gpt-4.1-mini",
    }


def test_control_characters_and_long_values_stay_one_valid_json_line(
    collected: tuple[logging.Logger, _Collect],
) -> None:
    logger, handler = collected
    log = SampledValueLog(1.0, 50, logger=logger, rng=lambda: 0.0)
    nasty = '"a\nb\x00c\u2028' + "é" * 500 + '"'
    log.offer("refund_order", problem(nasty), "c\nonv", "x" * 1000)
    (line,) = handler.lines
    assert "\n" not in line
    record = orjson.loads(line)
    assert len(record["value"]) == 50 and record["value"].endswith("…")
    assert len(record["call_id"]) == 50


def test_the_file_sink_writes_json_lines(tmp_path) -> None:
    path = tmp_path / "samples.jsonl"
    detach = attach_sample_sink(str(path))
    try:
        SampledValueLog(1.0, 200, rng=lambda: 0.0).offer("t", problem('"v"'), "c", "id")
    finally:
        detach()
    (line,) = path.read_text().splitlines()
    assert orjson.loads(line)["value"] == '"v"'


def test_records_dropped_by_a_writer_that_fell_behind_are_counted() -> None:
    import queue

    from argwatch.server.telemetry.samples import _DroppingQueueHandler, dropped_sample_records

    full: queue.Queue[logging.LogRecord] = queue.Queue(maxsize=1)
    handler = _DroppingQueueHandler(full)
    before = dropped_sample_records()
    record = logging.LogRecord("argwatch.samples", logging.INFO, __file__, 1, "{}", None, None)
    for _ in range(3):
        handler.enqueue(record)
    assert dropped_sample_records() == before + 2


@pytest.mark.slow
def test_a_sink_that_blocks_never_blocks_the_calls_and_what_it_cannot_take_is_counted(tmp_path) -> None:
    """A FIFO nobody reads blocks its writer, even on open: the gateway starts, offers return, drops are counted."""
    import os
    import threading

    from argwatch.server.telemetry.samples import dropped_sample_records

    fifo = tmp_path / "samples.fifo"
    os.mkfifo(fifo)
    detach = attach_sample_sink(str(fifo))  # would block here if the sink were opened at once
    before = dropped_sample_records()
    log = SampledValueLog(1.0, 200, rng=lambda: 0.0)
    for index in range(20_000):  # the queue holds 10,000; the writer is stuck opening the FIFO
        log.offer("t", problem(f'"v{index}"'), "c", str(index))
    assert dropped_sample_records() - before >= 10_000 - 1
    drained: list[bytes] = []
    reader = threading.Thread(target=lambda: drained.append(fifo.read_bytes()))
    reader.start()  # a reader arrives: the writer gets going, and detaching can finish
    detach()
    reader.join(timeout=30)
    lines = drained[0].decode().splitlines()
    assert lines and all(orjson.loads(line)["tool"] == "t" for line in lines)
