"""The decision log: every verdict as one JSON line, written off the event loop to rotated, bounded files."""

from argwatch.server.decisions.record import ValueHasher, decision_line
from argwatch.server.decisions.sink import DecisionSink, NoDecisionLog
from argwatch.server.decisions.writer import DecisionLogWriter, open_decision_log

__all__ = ["DecisionLogWriter", "DecisionSink", "NoDecisionLog", "ValueHasher", "decision_line", "open_decision_log"]
