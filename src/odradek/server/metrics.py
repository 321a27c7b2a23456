"""The broker's Prometheus metrics, under the names the Prometheus JMX exporter's Kafka rules give
Kafka's JMX beans (docs/metrics.md lists every name).

Owns:
- `RequestMetrics`, the network layer's request observer (server/socket_server.py): per API the requests
  per version, and the last SAMPLES total times (arrival to response sent) and request queue times
  (arrival to handling), from which scrapes compute Kafka's histogram percentiles;
- `BrokerCollector`, a prometheus_client collector that reads everything else when scraped: the
  ReplicaManager's counters (replication/stats.py), per-partition log sizes and offsets, replica
  and controller gauges, consumer group lag, purgatory sizes, connection counts, and the client
  quota groups (server/client_quotas.py) as Kafka's `kafka.server:type=Produce|Fetch|Request|
  ControllerMutation,user=..,client-id=..` beans come out of the JMX exporter's quota rules:
  `kafka_server_quota_<attribute>{resource, user, clientId}`, an empty tag left out as Kafka's
  JmxReporter leaves it out of the bean name;
- `broker_registry`, a registry of its own per broker (several brokers may share a process).

Invariants: on the request path the cost is one observer call per request (two header bytes read, a
dict lookup, two ring slots); nothing per partition is computed there. Everything that walks partitions
or groups runs at scrape time, on the event loop (the state it reads lives there).

Callers: the broker (builds the metrics and the registry), server/console_host.py (serves it at /metrics).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from odradek.protocol.api_keys import ApiKey
from odradek.server.client_quotas import now_monotonic_ms

if TYPE_CHECKING:
    from odradek.server.context import BrokerServices
    from odradek.server.socket_server import SocketServer

SAMPLES = 1024  # per API, the most recent requests the percentiles are computed over
# Kafka's histogram percentiles, labelled as the JMX exporter labels `<N>thPercentile` ("0.$N")
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))


def request_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys.name): LIST_OFFSETS -> ListOffsets."""
    try:
        words = ApiKey(api_key).name.split("_")
    except ValueError:
        return f"Unknown{api_key}"
    return "".join(word.capitalize() for word in words)


class ApiRequestStats:
    """One API's request counts per version and its latest SAMPLES times in milliseconds."""

    __slots__ = (
        "versions",
        "count",
        "total_ms",
        "queue_ms",
        "throttle_ms",
        "total_sum_ms",
        "queue_sum_ms",
        "throttle_sum_ms",
    )

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.count = 0
        self.total_ms = [0.0] * SAMPLES
        self.queue_ms = [0.0] * SAMPLES
        self.throttle_ms = [0.0] * SAMPLES
        self.total_sum_ms = 0.0
        self.queue_sum_ms = 0.0
        self.throttle_sum_ms = 0.0

    def record(self, version: int, queue_ms: float, total_ms: float, throttle_ms: int) -> None:
        self.versions[version] = self.versions.get(version, 0) + 1
        slot = self.count % SAMPLES
        self.queue_ms[slot] = queue_ms
        self.total_ms[slot] = total_ms
        self.throttle_ms[slot] = throttle_ms
        self.queue_sum_ms += queue_ms
        self.total_sum_ms += total_ms
        self.throttle_sum_ms += throttle_ms
        self.count += 1

    def quantiles(self, samples: list[float]) -> list[tuple[str, float]]:
        """The percentiles of the samples taken so far (at most the latest SAMPLES)."""
        ordered = sorted(samples[: min(self.count, SAMPLES)])
        if not ordered:
            return []
        last = len(ordered) - 1
        return [(label, ordered[min(last, int(q * len(ordered)))]) for label, q in QUANTILES]


class RequestMetrics:
    """The network layer's `RequestObserver`: counts and times every answered request per API."""

    def __init__(self) -> None:
        self.by_api: dict[int, ApiRequestStats] = {}

    def __call__(
        self, frame: bytes | bytearray, arrived: float, started: float, finished: float, throttle_ms: int
    ) -> None:
        api_key, version = frame[0] << 8 | frame[1], frame[2] << 8 | frame[3]  # the header's two int16s
        stats = self.by_api.get(api_key)
        if stats is None:
            stats = self.by_api[api_key] = ApiRequestStats()
        stats.record(version, (started - arrived) * 1000.0, (finished - arrived) * 1000.0, throttle_ms)


class BrokerCollector:
    """Reads the broker's state into metric families at each scrape."""

    def __init__(self, broker: BrokerServices, server: SocketServer, requests: RequestMetrics) -> None:
        self._broker = broker
        self._server = server
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._replica_metrics()
        yield from self._controller_metrics()
        yield from self._log_metrics()
        yield from self._group_lag()
        yield from self._group_counts()
        yield from self._purgatories()
        yield from self._network()
        yield from self._quota_metrics()

    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self._broker.replica_manager.topic_stats
        for field, name in (
            ("messages_in", "messagesin"),
            ("bytes_in", "bytesin"),
            ("bytes_out", "bytesout"),
        ):
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}", f"BrokerTopicMetrics {name}", labels=["topic"]
            )
            family.add_sample(family.name + "_total", {}, sum(getattr(c, field) for c in stats.values()))
            for topic, counters in sorted(stats.items()):
                family.add_metric([topic], getattr(counters, field))
            yield family
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Bytes read for follower replicas",
            sum(c.replication_bytes_out for c in stats.values()),
        )

    def _request_metrics(self) -> Iterator[Metric]:
        by_api = sorted((request_name(key), stats) for key, stats in self._requests.by_api.items())
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered", labels=["request", "version"]
        )
        for name, stats in by_api:
            for version, count in sorted(stats.versions.items()):
                requests.add_metric([name, str(version)], count)
        yield requests
        yield _times("totaltimems", "arrival to response sent", by_api, "total_ms", "total_sum_ms")
        yield _times("requestqueuetimems", "arrival to handling", by_api, "queue_ms", "queue_sum_ms")
        yield _times("throttletimems", "client quota throttle time", by_api, "throttle_ms", "throttle_sum_ms")

    def _replica_metrics(self) -> Iterator[Metric]:
        manager = self._broker.replica_manager
        partitions = manager.partitions()
        led = [p for p in partitions if p.is_leader]
        gauges = {
            "partitioncount": len(partitions),
            "leadercount": len(led),
            "underreplicatedpartitions": sum(1 for p in led if len(p.isr) < len(p.replicas)),
            "underminisrpartitioncount": sum(1 for p in led if len(p.isr) < p.min_insync_replicas),
        }
        for name, value in gauges.items():
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", f"ReplicaManager {name}", value)
        changes = manager.isr_changes
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks", changes.shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions", changes.expands)
        sessions = self._broker.fetch_sessions
        prefix = "kafka_server_fetchsessioncache_"
        yield GaugeMetricFamily(prefix + "numincrementalfetchsessions", "Fetch sessions held", len(sessions))
        yield GaugeMetricFamily(
            prefix + "numincrementalfetchpartitionscached",
            "Partitions the fetch sessions hold",
            sessions.partitions_cached,
        )

    def _controller_metrics(self) -> Iterator[Metric]:
        broker = self._broker
        active = broker.controller is not None
        offline = 0
        if active:
            live = {b.broker_id for b in broker.metadata_cache.brokers()}
            offline = sum(
                1
                for topic in broker.metadata_cache.topics().values()
                for state in topic.partitions.values()
                if state.leader not in live
            )
        prefix = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active controller", int(active))
        yield GaugeMetricFamily(prefix + "offlinepartitionscount", "Partitions with no live leader", offline)
        unreached = len(broker.controller.unreached_brokers()) if broker.controller is not None else 0
        yield GaugeMetricFamily(
            "odradek_controller_unreached_brokers", "Live brokers the controller's channel misses", unreached
        )
        contact = broker.controller_contact
        yield GaugeMetricFamily(
            "odradek_broker_controller_silent",
            "1 while the current controller has sent this broker nothing since it registered",
            int(contact is not None and contact.silent),
        )

    def _log_metrics(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        for p in sorted(self._broker.replica_manager.partitions(), key=lambda p: (p.topic, p.partition)):
            key = [p.topic, str(p.partition)]
            size.add_metric(key, p.log.size_in_bytes)
            end.add_metric(key, p.log_end_offset)
            start.add_metric(key, p.log_start_offset)
        yield from (size, end, start)

    def _group_lag(self) -> Iterator[Metric]:
        """Per group and partition with a committed offset: the high watermark minus that offset,
        for the partitions hosted on this broker (leader or follower)."""
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark - committed offset", labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset", labels=labels)
        replica_manager = self._broker.replica_manager
        for shard in self._broker.group_coordinator.shards().values():
            for group_id, group in sorted(shard.groups.items()):
                for tp, committed in sorted(group.offsets.items(), key=lambda item: item[0]):
                    key = [group_id, tp.topic, str(tp.partition)]
                    current.add_metric(key, committed.offset)
                    partition = replica_manager.partition(tp.topic, tp.partition)
                    if partition is not None:
                        lag.add_metric(key, max(partition.high_watermark - committed.offset, 0))
        yield from (lag, current)

    def _group_counts(self) -> Iterator[Metric]:
        """The groups this broker coordinates: by protocol (Kafka's group-count,protocol=classic|consumer|
        share) and per protocol by state (classic-group-count, consumer-group-count, share-group-count,
        state lowercase). A consumer-protocol group's offsets live in a classic entry of its id, which is
        not counted."""
        prefix = "kafka_server_group_coordinator_metrics_"
        total = GaugeMetricFamily(f"{prefix}group_count", "Groups by protocol", labels=["protocol"])
        by_state = {
            protocol: GaugeMetricFamily(
                f"{prefix}{protocol}_group_count",
                f"{protocol.capitalize()} groups by state",
                labels=["state"],
            )
            for protocol in ("classic", "consumer", "share")
        }
        counts: dict[str, dict[str, int]] = {"classic": {}, "consumer": {}, "share": {}}
        for shard in self._broker.group_coordinator.shards().values():
            for group_id, group in shard.groups.items():
                if group_id not in shard.consumer_groups:
                    states = counts["classic"]
                    states[group.state.value] = states.get(group.state.value, 0) + 1
            for protocol, groups in (("consumer", shard.consumer_groups), ("share", shard.share_groups)):
                states = counts[protocol]
                for modern in groups.values():
                    states[modern.state.value] = states.get(modern.state.value, 0) + 1
        for protocol, states in counts.items():
            total.add_metric([protocol], sum(states.values()))
            for state, count in sorted(states.items()):
                by_state[protocol].add_metric([state.lower()], count)
        yield from (total, *by_state.values())

    def _purgatories(self) -> Iterator[Metric]:
        manager = self._broker.replica_manager
        family = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Operations waiting",
            labels=["delayedOperation"],
        )
        for purgatory in (manager.produce_purgatory, manager.fetch_purgatory):
            family.add_metric([purgatory.name], len(purgatory))
        yield family

    def _network(self) -> Iterator[Metric]:
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count", "Open connections", labels=["listener"]
        )
        counts = self._server.connections_by_listener()
        for listener in self._broker.config.listeners:
            connections.add_metric([listener.name], counts.get(listener.name, 0))
        yield connections
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolused",
            "Bytes of request frames held",
            self._server.memory_pool.used,
        )

    def _quota_metrics(self) -> Iterator[Metric]:
        quotas = self._broker.quotas
        now_ms = now_monotonic_ms()
        families: dict[str, Metric] = {}
        for resource, manager, attribute in (
            ("Produce", quotas.produce, "byte_rate"),
            ("Fetch", quotas.fetch, "byte_rate"),
            ("Request", quotas.request, "request_time"),
            ("ControllerMutation", quotas.controller_mutation, "mutation_rate"),
        ):
            for group in manager.groups():
                rate, throttle_ms = manager.measure(group, now_ms)
                labels = {"resource": resource}
                labels |= {"user": group.user} if group.user else {}
                labels |= {"clientId": group.client_id} if group.client_id else {}
                for name, value in ((attribute, rate), ("throttle_time", throttle_ms)):
                    family = families.setdefault(
                        name, Metric(f"kafka_server_quota_{name}", QUOTA_DOCS[name], "gauge")
                    )
                    family.add_sample(f"kafka_server_quota_{name}", labels, value)
        yield from families.values()


QUOTA_DOCS = {
    "byte_rate": "Bytes per second of the quota group (Produce: requests; Fetch: records answered)",
    "request_time": "Percentage of request-handling time per second taken by the quota group",
    "mutation_rate": "Partitions created or deleted per second by the quota group",
    "throttle_time": "Average throttle time in ms of the quota group's throttled requests",
}


def _times(name: str, doc: str, by_api: list[tuple[str, ApiRequestStats]], ring: str, total: str) -> Metric:
    family = SummaryMetricFamily(f"kafka_network_requestmetrics_{name}", doc, labels=["request"])
    for request, stats in by_api:
        samples: list[float] = getattr(stats, ring)
        _add_summary(family, request, stats.quantiles(samples), stats.count, getattr(stats, total))
    return family


def _add_summary(
    family: SummaryMetricFamily, request: str, quantiles: list[tuple[str, float]], count: int, total: float
) -> None:
    for label, value in quantiles:
        family.add_sample(family.name, {"request": request, "quantile": label}, value)
    family.add_metric([request], count, total)


def broker_registry(
    broker: BrokerServices, server: SocketServer, requests: RequestMetrics
) -> CollectorRegistry:
    """A registry of the broker's own (no process or platform collectors: brokers may share a
    process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, server, requests))
    return registry
