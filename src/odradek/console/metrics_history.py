"""The last hour of the hosting broker's own metrics, kept in memory for the console's charts.

Owns `MetricsHistory`: every `interval_ms` (`console.metrics.sample.ms`) it reads the broker's
Prometheus registry (server/metrics.py's names, docs/metrics.md) and keeps one `Sample` per interval,
at most an hour of them (a bounded deque):
- bytes in and out per second: the rise of `kafka_server_brokertopicmetrics_bytesin_total` and
  `..._bytesout_total` (the all-topics samples) over the interval;
- requests per second by API: the rise of `kafka_network_requestmetrics_requests_total`, summed over
  versions;
- request latency p50 and p99 per API: `kafka_network_requestmetrics_totaltimems{quantile=0.50|0.99}`
  (over each API's latest 1024 requests), kept only for the APIs that answered requests during the
  interval (an idle API's percentiles are old news);
- under-replicated partitions: `kafka_server_replicamanager_underreplicatedpartitions`;
- produce and fetch throttle time: the mean of `kafka_network_requestmetrics_throttletimems` over the
  interval's Produce and Fetch requests (its `_sum` and `_count` rises; 0 with no request).

Invariants: a sample runs on the event loop (the broker state the collectors read lives there, as for
`/metrics`); it is one `registry.collect()` plus a pass over its samples, and its cost (perf counter)
is kept in `last_cost_ms`. The first reading is the baseline of the rates and makes no sample. Only
non-zero rates and present percentiles are stored, so an idle hour stays small.

Callers: console/chart_pages.py.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

WINDOW_MS = 3_600_000
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
THROTTLE = "kafka_network_requestmetrics_throttletimems"
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
THROTTLED_APIS = ("Produce", "Fetch")


@dataclass(frozen=True)
class Reading:
    """The registry's raw values at one moment (counters as they stand)."""

    monotonic_ms: int
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    requests: dict[str, float] = field(default_factory=dict)  # API -> requests answered, all versions
    p50: dict[str, float] = field(default_factory=dict)
    p99: dict[str, float] = field(default_factory=dict)
    throttle_sum: dict[str, float] = field(default_factory=dict)  # Produce / Fetch -> ms
    throttle_count: dict[str, float] = field(default_factory=dict)
    under_replicated: float = 0.0


@dataclass(frozen=True)
class Sample:
    """One interval's point of every chart."""

    time_s: float  # wall clock, Unix seconds
    bytes_in: float  # per second
    bytes_out: float
    requests: dict[str, float]  # API -> per second (only APIs with requests)
    p50: dict[str, float]  # API -> ms (only APIs with requests in the interval)
    p99: dict[str, float]
    under_replicated: float
    throttle: dict[str, float]  # Produce / Fetch -> mean ms per request


def read(registry: CollectorRegistry, monotonic_ms: int) -> Reading:
    """One pass over the registry's current samples."""
    bytes_in = bytes_out = under_replicated = 0.0
    requests: dict[str, float] = {}
    p50: dict[str, float] = {}
    p99: dict[str, float] = {}
    throttle_sum: dict[str, float] = {}
    throttle_count: dict[str, float] = {}
    for family in registry.collect():
        name = family.name
        if not name.startswith(("kafka_server_", "kafka_network_requestmetrics_")):
            continue
        for s in family.samples:
            labels = s.labels
            if s.name == BYTES_IN and "topic" not in labels:
                bytes_in = s.value
            elif s.name == BYTES_OUT and "topic" not in labels:
                bytes_out = s.value
            elif s.name == REQUESTS:
                api = labels.get("request", "")
                requests[api] = requests.get(api, 0.0) + s.value
            elif s.name == TOTAL_TIME:
                quantile = labels.get("quantile")
                if quantile == "0.50":
                    p50[labels["request"]] = s.value
                elif quantile == "0.99":
                    p99[labels["request"]] = s.value
            elif s.name.startswith(THROTTLE) and labels.get("request") in THROTTLED_APIS:
                if s.name == THROTTLE + "_sum":
                    throttle_sum[labels["request"]] = s.value
                elif s.name == THROTTLE + "_count":
                    throttle_count[labels["request"]] = s.value
            elif s.name == UNDER_REPLICATED:
                under_replicated = s.value
    return Reading(
        monotonic_ms, bytes_in, bytes_out, requests, p50, p99, throttle_sum, throttle_count, under_replicated
    )


def between(before: Reading, after: Reading, time_s: float) -> Sample:
    """The sample of the interval from `before` to `after` (counters that went down count from 0)."""
    seconds = max(after.monotonic_ms - before.monotonic_ms, 1) / 1000.0

    def rise(now: float, then: float) -> float:
        return now - then if now >= then else now

    counts = {api: rise(n, before.requests.get(api, 0.0)) for api, n in after.requests.items()}
    active = {api for api, n in counts.items() if n > 0}
    throttle = {}
    for api in THROTTLED_APIS:
        requests = rise(after.throttle_count.get(api, 0.0), before.throttle_count.get(api, 0.0))
        total = rise(after.throttle_sum.get(api, 0.0), before.throttle_sum.get(api, 0.0))
        throttle[api] = total / requests if requests > 0 else 0.0
    return Sample(
        time_s,
        rise(after.bytes_in, before.bytes_in) / seconds,
        rise(after.bytes_out, before.bytes_out) / seconds,
        {api: counts[api] / seconds for api in sorted(active)},
        {api: v for api, v in sorted(after.p50.items()) if api in active},
        {api: v for api, v in sorted(after.p99.items()) if api in active},
        after.under_replicated,
        throttle,
    )


class MetricsHistory:
    """The bounded history of one registry's metrics; see the module docstring."""

    def __init__(
        self,
        registry: CollectorRegistry,
        interval_ms: int,
        monotonic_ms: Callable[[], int],
        time_ms: Callable[[], int],
    ) -> None:
        self.registry = registry
        self.interval_ms = interval_ms
        self.samples: deque[Sample] = deque(maxlen=max(1, WINDOW_MS // interval_ms))
        self.last_cost_ms = 0.0
        self.start_s: float | None = None  # when the interval of the oldest sample kept began
        self._monotonic_ms = monotonic_ms
        self._time_ms = time_ms
        self._last: Reading | None = None

    def sample(self) -> None:
        """Read the registry; append the interval's sample once there is a previous reading."""
        started = time.perf_counter()
        reading = read(self.registry, self._monotonic_ms())
        now_s = self._time_ms() / 1000.0
        if self._last is None:
            self.start_s = now_s
        else:
            if len(self.samples) == self.samples.maxlen:
                self.start_s = self.samples[0].time_s
            self.samples.append(between(self._last, reading, now_s))
        self._last = reading
        self.last_cost_ms = (time.perf_counter() - started) * 1000.0

    def charts(self) -> dict[str, Any]:
        """The history as the charts page draws it: shared timestamps (each the end of its sample's
        interval; `start` the beginning of the first's) and, per chart, its series (one value per
        timestamp, None where a series has no point)."""
        samples = list(self.samples)
        return {
            "interval_ms": self.interval_ms,
            "sample_cost_ms": round(self.last_cost_ms, 3),
            "start": self.start_s,
            "time": [s.time_s for s in samples],
            "charts": [
                _chart(
                    "bytes",
                    "Bytes per second",
                    "B/s",
                    [("in", [s.bytes_in for s in samples]), ("out", [s.bytes_out for s in samples])],
                ),
                _chart("requests", "Requests per second by API", "req/s", _by_api(samples, "requests", 0.0)),
                _chart("latency-p50", "Request latency p50 by API", "ms", _by_api(samples, "p50", None)),
                _chart("latency-p99", "Request latency p99 by API", "ms", _by_api(samples, "p99", None)),
                _chart(
                    "under-replicated",
                    "Under-replicated partitions",
                    "partitions",
                    [("under-replicated", [s.under_replicated for s in samples])],
                ),
                _chart(
                    "throttle",
                    "Throttle time, mean per request",
                    "ms",
                    [(api, [s.throttle.get(api, 0.0) for s in samples]) for api in THROTTLED_APIS],
                ),
            ],
        }


def _by_api(samples: Iterable[Sample], attribute: str, missing: float | None) -> list[tuple[str, list]]:
    samples = list(samples)
    apis = sorted({api for s in samples for api in getattr(s, attribute)})
    return [(api, [getattr(s, attribute).get(api, missing) for s in samples]) for api in apis]


def _chart(key: str, title: str, unit: str, series: list[tuple[str, list]]) -> dict[str, Any]:
    return {
        "id": key,
        "title": title,
        "unit": unit,
        "series": [{"label": label, "values": [_round(v) for v in values]} for label, values in series],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
