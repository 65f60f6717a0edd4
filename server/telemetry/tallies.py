"""Collectors for the hot path and scrape-time values: tallies (plain ints bumped on the event loop), a
label-less histogram, a counter read from a callable, and the value sets' health read from the provider."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar

from argwatch.server.telemetry._buckets import Buckets


class ValueSetHealth(NamedTuple):
    """One set's health at scrape time."""

    name: str
    age_seconds: float  # inf when never loaded
    stale: bool
    available: bool
    version: int = -1  # -1 when never loaded


class ValueSetHealthCollector(Collector):
    """argwatch_value_set_{age_seconds,stale,available,version}, computed at scrape time from the provider's state."""

    def __init__(self) -> None:
        self._sources: list[Callable[[], Iterable[ValueSetHealth]]] = []

    def replace(self, source: Callable[[], Iterable[ValueSetHealth]]) -> None:
        self._sources = [source]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "argwatch_value_set_age_seconds",
            "Seconds since the value set's source last confirmed the copy in use (+Inf: never loaded).",
            labels=["set"],
        )
        stale = GaugeMetricFamily(
            "argwatch_value_set_stale",
            "1 while the copy in use is stale: its source is down or has not confirmed it within the TTL.",
            labels=["set"],
        )
        available = GaugeMetricFamily(
            "argwatch_value_set_available",
            "1 while the set can be checked against; 0 when never loaded or older than max_staleness.",
            labels=["set"],
        )
        version = GaugeMetricFamily(
            "argwatch_value_set_version",
            "The version of the value set's copy in use (-1: never loaded); replicas should agree.",
            labels=["set"],
        )
        for source in self._sources:
            for health in source():
                version.add_metric([health.name], float(health.version))
                age.add_metric([health.name], health.age_seconds)
                stale.add_metric([health.name], 1.0 if health.stale else 0.0)
                available.add_metric([health.name], 1.0 if health.available else 0.0)
        yield age
        yield stale
        yield available
        yield version


class Tally:
    """A counter child for the hot path: an int bumped on the event loop thread, read at scrape time.

    prometheus_client's child takes a lock and checks on every inc; this is one add (docs/performance.md).
    Only the event loop thread increments; a scrape reads whole ints.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, amount: int = 1) -> None:
        self.value += amount


class TallyFamily(Collector):
    """A counter family (name_total) of Tally children, keyed by label values."""

    def __init__(self, name: str, documentation: str, labelnames: list[str], registry: CollectorRegistry) -> None:
        self._name, self._documentation, self._labelnames = name, documentation, labelnames
        self._children: dict[tuple[str, ...], Tally] = {}
        # The children in creation order, for count_feed.py to read the new ones only; rebuilt after a removal.
        self._series: list[tuple[tuple[str, ...], Tally]] = []
        self._series_whole = True
        self.generation = 0  # moved on by every removal
        registry.register(self)

    def labels(self, *values: str) -> Tally:
        tally = self._children.get(values)
        if tally is None:
            tally = self._children[values] = Tally()
            self._series.append((values, tally))
        return tally

    def remove(self, *values: str) -> None:
        if self._children.pop(values, None) is not None:
            self.generation += 1
            self._series_whole = False

    def series(self) -> list[tuple[tuple[str, ...], Tally]]:
        """Every child, in creation order: a child made after a read is after every child that read saw."""
        if not self._series_whole:
            self._series, self._series_whole = list(self._children.items()), True
        return self._series

    def children(self) -> list[tuple[tuple[str, ...], Tally]]:
        return list(self._children.items())

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, tally in list(self._children.items()):
            family.add_metric(list(values), tally.value)
        yield family

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)


class TallyHistogram(Collector):
    """A label-less histogram for the hot path: its buckets are a C object (_buckets.c), observed with no Python
    frame, where prometheus_client's Histogram takes a lock per observation. Only the event loop thread
    observes; edge/_answers.c observes a call it answers straight into `buckets`."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry) -> None:
        self._name, self._documentation = name, documentation
        self._bounds = tuple(sorted(buckets))
        self.buckets = Buckets(self._bounds)
        self.observe: Callable[[float], None] = self.buckets.observe
        # Per bucket, the latest traced observation (trace id, value, when), shown only in OpenMetrics.
        self._exemplars: list[tuple[str, float, float] | None] = [None] * (len(self._bounds) + 1)
        registry.register(self)

    def observe_traced(self, value: float, trace_id: str) -> None:
        """`observe`, keeping the traced call as its bucket's exemplar (the latest one per bucket, as
        prometheus_client keeps them): with tracing on, a slow bucket on a dashboard leads to a trace."""
        # A tuple replaced whole, never mutated: the scrape's thread reads it while the loop writes.
        self._exemplars[self.buckets.observe_index(value)] = (trace_id, value, time.time())

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative = 0
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        bounds = (*self._bounds, float("inf"))
        for bound, count, kept in zip(bounds, self.buckets.counts(), list(self._exemplars), strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            if kept is None:
                buckets.append((le, cumulative))
            else:
                trace_id, value, at = kept
                buckets.append((le, cumulative, Exemplar({"trace_id": trace_id}, value, at)))
        yield HistogramMetricFamily(self._name, self._documentation, buckets=buckets, sum_value=self.buckets.sum)

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self._name, self._documentation)


class CallbackCounter(Collector):
    """A counter whose value is read from a callable at scrape time."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self._name, self._documentation, self._read = name, documentation, read

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._read())
