"""The decision log as OTLP log records: each line the log's writer thread writes also goes out, one record each.

The SDK's batch processor holds a bounded queue, and when it is full drops a
record with no more than a warning in its own log. So the bound is kept here,
in front of it: lines handed over and not yet exported are counted, and past
`queue` lines or QUEUE_BYTES a line is dropped and counted in
argwatch_decision_log_dropped_total (reason `otlp_queue_full`); a batch the collector did not take after the
exporter's retries is counted there too (reason `otlp_export_error`). The file
is written whatever happens here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import orjson
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.util.types import AttributeValue

OTLP_QUEUE_FULL = "otlp_queue_full"
OTLP_EXPORT_ERROR = "otlp_export_error"
OTLP_DROP_REASONS = (OTLP_QUEUE_FULL, OTLP_EXPORT_ERROR)
# Lines handed over and not yet exported, in bytes of their bodies, at most (besides `queue` lines): a collector
# that hangs keeps this much, however long the lines.
QUEUE_BYTES = 64 << 20
EVENT_NAME = "argwatch.decision"
SCOPE = "argwatch.server.decisions"
# A line's fields also set as record attributes, under the GenAI conventions' names where there are some, so
# a collector can route and filter without parsing the body.
_ATTRIBUTES = {
    "tool": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
    "conversation_id": "gen_ai.conversation.id",
    "decision": "argwatch.decision",
    "mode": "argwatch.mode",
    "policy_version": "argwatch.policy_version",
}


class DecisionLogExport:
    """Hands each decision-log line to the SDK's batch processor; `forward` is called on the writer's thread."""

    def __init__(
        self, provider: LoggerProvider, exporter: LogRecordExporter, queue: int, dropped: Callable[[str], None]
    ) -> None:
        self._queue = queue
        self._dropped = dropped
        self._pending = 0  # handed to the processor, not yet exported (or given up on)
        self._pending_bytes = 0  # their bodies' length
        self._lock = threading.Lock()  # the writer's thread adds, the processor's export thread takes away
        provider.add_log_record_processor(
            BatchLogRecordProcessor(
                _Settled(exporter, self._settled), max_queue_size=queue, max_export_batch_size=min(512, queue)
            )
        )
        self._logger = provider.get_logger(SCOPE)

    def forward(self, line: bytes) -> None:
        """Emits one line (the JSON text, newline included) as a log record; never raises."""
        body = line.decode(errors="replace").rstrip("\n")
        size = len(body)
        with self._lock:
            if self._pending >= self._queue or (self._pending and self._pending_bytes + size > QUEUE_BYTES):
                full = True
            else:
                full = False
                self._pending += 1
                self._pending_bytes += size
        if full:
            self._dropped(OTLP_QUEUE_FULL)
            return
        try:
            record = orjson.loads(line)
            attributes: dict[str, AttributeValue] = {
                name: str(record[key]) for key, name in _ATTRIBUTES.items() if record.get(key)
            }
            attributes["argwatch.problem_count"] = len(record.get("problems") or ())
            self._logger.emit(
                timestamp=int(float(record["ts"]) * 1e9),
                severity_number=SeverityNumber.INFO,
                body=body,
                attributes=attributes,
                event_name=EVENT_NAME,
            )
        except Exception:  # a line that cannot be sent is this copy's loss only: the file has it
            self._settled(1, size, False)

    def _settled(self, count: int, size: int, exported: bool) -> None:
        with self._lock:
            self._pending -= count
            self._pending_bytes -= size
        if not exported:
            for _ in range(count):
                self._dropped(OTLP_EXPORT_ERROR)


class _Settled(LogRecordExporter):
    """The OTLP exporter, telling after each batch how many records left the queue and whether they arrived."""

    def __init__(self, exporter: LogRecordExporter, settled: Callable[[int, int, bool], None]) -> None:
        self._exporter = exporter
        self._settled = settled

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = LogRecordExportResult.FAILURE
        try:
            result = self._exporter.export(batch)
        finally:
            size = sum(len(body) for one in batch if isinstance(body := one.log_record.body, str))
            self._settled(len(batch), size, result is LogRecordExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK's base class leaves it unannotated

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)
