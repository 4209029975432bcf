"""Prometheus metrics that cost well under a microsecond on the request path.

prometheus_client's labelled instruments take a lock and a dict lookup per call;
at tens of thousands of requests per second per core that is a visible share of
the budget. These instruments are plain dicts and lists owned by one event loop
(one worker process), rendered by a prometheus_client ``Collector`` at scrape
time. With several workers each worker answers ``snapshot()`` and the supervisor
merges the snapshots (``merge``), so one scrape shows the whole gateway.

Every module declares its instruments at import with :func:`counter`,
:func:`gauge` or :func:`histogram`; they are all in ``REGISTRY``, and a metric
family is exported (HELP/TYPE) even before its first sample, so dashboards and
alerts can be checked against the names the gateway really exports.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest

LATENCY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                   0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Counter:
    """A monotonically increasing value per label tuple."""

    kind = "counter"

    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> None:
        self.name, self.doc, self.labels = name, doc, labels
        self.values: dict[tuple[str, ...], float] = {}
        if not labels:
            self.values[()] = 0.0

    def inc(self, *labelvalues: str, amount: float = 1.0) -> None:
        values = self.values
        values[labelvalues] = values.get(labelvalues, 0.0) + amount

    def get(self, *labelvalues: str) -> float:
        return self.values.get(labelvalues, 0.0)

    def snapshot(self) -> dict[tuple[str, ...], float]:
        return dict(self.values)


class Gauge:
    """A value that goes up and down, or is read from a callback at scrape time."""

    kind = "gauge"

    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = (),
                 callback: Callable[[], Iterable[tuple[tuple[str, ...], float]]] | None = None,
                 merge: str = "sum") -> None:
        self.name, self.doc, self.labels, self.callback = name, doc, labels, callback
        # how snapshots of several workers combine: sum, max, min, or "worker" (keep each,
        # with a worker label added by the supervisor)
        self.merge_mode = merge
        self.values: dict[tuple[str, ...], float] = {}
        if not labels and callback is None:
            self.values[()] = 0.0

    def set(self, value: float, *labelvalues: str) -> None:
        self.values[labelvalues] = value

    def inc(self, *labelvalues: str, amount: float = 1.0) -> None:
        self.values[labelvalues] = self.values.get(labelvalues, 0.0) + amount

    def dec(self, *labelvalues: str, amount: float = 1.0) -> None:
        self.values[labelvalues] = self.values.get(labelvalues, 0.0) - amount

    def get(self, *labelvalues: str) -> float:
        if self.callback is not None:
            return dict(self.callback()).get(labelvalues, 0.0)
        return self.values.get(labelvalues, 0.0)

    def snapshot(self) -> dict[tuple[str, ...], float]:
        if self.callback is not None:
            return dict(self.callback())
        return dict(self.values)


class Histogram:
    """Cumulative-bucket histogram per label tuple (bucket counts kept non-cumulative)."""

    kind = "histogram"

    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = (),
                 buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.name, self.doc, self.labels = name, doc, labels
        self.buckets = tuple(sorted(buckets))
        # label tuple -> [count per bucket..., +Inf count, sum]
        self.values: dict[tuple[str, ...], list[float]] = {}

    def observe(self, value: float, *labelvalues: str) -> None:
        row = self.values.get(labelvalues)
        if row is None:
            row = self.values[labelvalues] = [0.0] * (len(self.buckets) + 2)
        row[bisect_left(self.buckets, value)] += 1
        row[-1] += value

    def count(self, *labelvalues: str) -> float:
        row = self.values.get(labelvalues)
        return sum(row[:-1]) if row else 0.0

    def quantile(self, q: float, *labelvalues: str) -> float:
        """Upper bound of the bucket holding quantile ``q`` (for status pages and tests)."""
        row = self.values.get(labelvalues)
        if not row:
            return 0.0
        total = sum(row[:-1])
        seen = 0.0
        for i, n in enumerate(row[:-1]):
            seen += n
            if seen >= q * total:
                return self.buckets[i] if i < len(self.buckets) else float("inf")
        return float("inf")

    def snapshot(self) -> dict[tuple[str, ...], list[float]]:
        return {k: list(v) for k, v in self.values.items()}


Instrument = Counter | Gauge | Histogram


class Registry:
    """All instruments of this process, plus an optional source of other workers' snapshots."""

    def __init__(self) -> None:
        self.instruments: dict[str, Instrument] = {}
        # set by the supervisor: returns the snapshots of all workers (its own excluded)
        self.remote: Callable[[], list[dict[str, Any]]] | None = None

    def add(self, instrument: Instrument) -> Any:
        existing = self.instruments.get(instrument.name)
        if existing is not None:
            if type(existing) is not type(instrument) or existing.labels != instrument.labels:
                raise ValueError(f"metric {instrument.name} registered twice with different shapes")
            return existing
        self.instruments[instrument.name] = instrument
        return instrument

    def snapshot(self) -> dict[str, Any]:
        """Picklable values of every instrument of this process."""
        return {name: inst.snapshot() for name, inst in self.instruments.items()}

    def reset(self) -> None:
        """Clear every value (tests only)."""
        for inst in self.instruments.values():
            inst.values.clear()
            if isinstance(inst, Counter) and not inst.labels:
                inst.values[()] = 0.0

    def families(self, snapshots: list[dict[str, Any]] | None = None) -> Iterator[Metric]:
        snaps = snapshots if snapshots is not None else self._all_snapshots()
        for name, inst in self.instruments.items():
            merged = merge([(i, s.get(name, {})) for i, s in enumerate(snaps)], inst)
            yield _family(inst, merged)

    def _all_snapshots(self) -> list[dict[str, Any]]:
        if self.remote is not None:
            return self.remote()
        return [self.snapshot()]

    def render(self) -> bytes:
        """The Prometheus text exposition of every instrument (all workers)."""
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Collector(self))
        return generate_latest(reg)


class _Collector:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.families()

    def describe(self) -> list[Metric]:
        return []


def merge(snaps: list[tuple[int, dict[tuple[str, ...], Any]]], inst: Instrument) -> dict[tuple[str, ...], Any]:
    """Combine per-worker snapshots of one instrument."""
    out: dict[tuple[str, ...], Any] = {}
    for worker, values in snaps:
        for key, value in values.items():
            if isinstance(inst, Histogram):
                row = out.get(key)
                out[key] = list(value) if row is None else [a + b for a, b in zip(row, value, strict=True)]
            elif isinstance(inst, Gauge) and inst.merge_mode == "worker":
                out[(*key, str(worker))] = value
            elif isinstance(inst, Gauge) and inst.merge_mode in ("max", "min") and key in out:
                out[key] = max(out[key], value) if inst.merge_mode == "max" else min(out[key], value)
            else:
                out[key] = out.get(key, 0.0) + value
    return out


def _family(inst: Instrument, values: dict[tuple[str, ...], Any]) -> Metric:
    labels = list(inst.labels)
    if isinstance(inst, Counter):
        name = inst.name[:-6] if inst.name.endswith("_total") else inst.name
        counter_fam = CounterMetricFamily(name, inst.doc, labels=labels)
        for key, v in values.items():
            counter_fam.add_metric(list(key), v)
        return counter_fam
    if isinstance(inst, Gauge):
        if inst.merge_mode == "worker":
            labels = [*labels, "worker"]
        gauge_fam = GaugeMetricFamily(inst.name, inst.doc, labels=labels)
        for key, v in values.items():
            gauge_fam.add_metric(list(key), v)
        return gauge_fam
    fam = HistogramMetricFamily(inst.name, inst.doc, labels=labels)
    for key, row in values.items():
        cumulative, buckets = 0.0, []
        for bound, n in zip((*inst.buckets, float("inf")), row[:-1], strict=True):
            cumulative += n
            buckets.append((_bound(bound), cumulative))
        fam.add_metric(list(key), buckets, row[-1])
    return fam


def _bound(b: float) -> str:
    return "+Inf" if b == float("inf") else repr(float(b))


REGISTRY = Registry()


def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
    """Declare (or fetch) a counter in the process registry. Name it ``*_total``."""
    return REGISTRY.add(Counter(name, doc, labels))  # type: ignore[no-any-return]


def gauge(name: str, doc: str, labels: tuple[str, ...] = (), *,
          callback: Callable[[], Iterable[tuple[tuple[str, ...], float]]] | None = None, merge: str = "sum") -> Gauge:
    """Declare (or fetch) a gauge; ``callback`` makes it read-at-scrape."""
    return REGISTRY.add(Gauge(name, doc, labels, callback, merge))  # type: ignore[no-any-return]


def histogram(name: str, doc: str, labels: tuple[str, ...] = (), buckets: tuple[float, ...] = LATENCY_BUCKETS) -> Histogram:
    """Declare (or fetch) a histogram in the process registry."""
    return REGISTRY.add(Histogram(name, doc, labels, buckets))  # type: ignore[no-any-return]


def _rss() -> Iterable[tuple[tuple[str, ...], float]]:
    try:
        with open(f"/proc/{os.getpid()}/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
        return [((), float(pages * os.sysconf("SC_PAGE_SIZE")))]
    except (OSError, ValueError, IndexError):
        return []


# ---- instruments of the data path and the process (other modules declare their own)
REQUESTS = counter("clefgate_requests_total", "Requests answered, by status, route, backend, verdict action and decision source.",
                   ("status", "route", "backend", "verdict", "source"))
ADDED_LATENCY = histogram("clefgate_added_latency_seconds",
                          "Time the gateway added to a request: from the complete request head to the upstream write, plus "
                          "from the upstream response head to the client write; or the whole time for gateway-made responses.")
UPSTREAM_LATENCY = histogram("clefgate_upstream_latency_seconds", "Time from sending the request upstream to its response head.",
                             ("backend",))
UPSTREAM_ERRORS = counter("clefgate_upstream_errors_total", "Upstream failures by backend and kind (connect, timeout, reset, protocol).",
                          ("backend", "kind"))
CLIENT_ERRORS = counter("clefgate_client_errors_total", "Requests refused by the gateway before deciding, by reason (400, 408, 413, 431 causes).",
                        ("reason",))
OPEN_CONNECTIONS = gauge("clefgate_open_connections", "Open connections, by side (client, upstream, tunnel).", ("side",))
RSS_BYTES = gauge("clefgate_worker_rss_bytes", "Resident memory of each worker process.", callback=_rss, merge="worker")
CONFIG_RELOADS = counter("clefgate_config_reloads_total", "Config reloads by result (ok, error).", ("result",))
