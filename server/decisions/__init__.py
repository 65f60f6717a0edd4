"""The decision log: every verdict as one JSON line, written off the event loop to rotated, bounded files."""

from argwatch.server.decisions.record import LineBuilder, ValueHasher
from argwatch.server.decisions.sink import DecisionSink, NoDecisionLog
from argwatch.server.decisions.writer import DecisionLogWriter, open_decision_log

__all__ = ["DecisionLogWriter", "DecisionSink", "LineBuilder", "NoDecisionLog", "ValueHasher", "open_decision_log"]
