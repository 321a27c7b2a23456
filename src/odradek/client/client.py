"""A small blocking Kafka client: metadata, offsets, fetch, produce and topic administration.

Owns the connections to a cluster (one per broker, opened lazily from the bootstrap servers), the
last Metadata it saw, and the routing of partition requests to partition leaders.

Behaviour:
- `metadata` always asks the broker; partition requests use the cached metadata and refresh it when
  a leader is unknown or a broker answers NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE (or any other
  retriable error, or the connection breaks). Such requests are retried with a short backoff until
  `timeout_s` has passed, then the last error is raised.
- `list_offsets` takes Kafka's special timestamps: -2 (earliest: the log start offset) and -1
  (latest: the high watermark); any other value finds the first offset whose timestamp is at or
  after it (-1 when there is none).
- `fetch` reads one partition and returns the partition's error code instead of raising, so callers
  decide what OFFSET_OUT_OF_RANGE or UNKNOWN_TOPIC_OR_PARTITION mean to them. A fetch a consumer
  quota throttled is answered with no partitions (KIP-219): the client waits out its
  throttle_time_ms and asks again.
- Isolation: READ_UNCOMMITTED by default; with `read_committed`, Fetch and ListOffsets ask for
  READ_COMMITTED, so reads stop at the last stable offset and -1 (latest) is the last stable offset.
  A fetch returns the answer's aborted transactions with its records; `read_range` leaves their
  batches out (odradek.client.aborted).
- `produce` sends pre-built RecordBatch bytes with acks 1 or -1 (all) and returns base offsets.
- Opening a connection is bounded by `connect_timeout_s` (Kafka's socket.connection.setup.timeout.ms,
  default 10 s). `KafkaClient.connect` builds a client and first reaches one bootstrap server with
  bounded, announced retries (odradek.client.bootstrap), for tools that face a person; a client built
  directly connects lazily. A host that does not resolve is not retried.

Invariants: no background threads; every call blocks and is bounded by `timeout_s`. Not thread-safe:
one client per thread. Callers: odradek.spark, odradek.pipeline, odradek.cli, tests, benchmarks.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from odradek.client.bootstrap import BrokerUnreachable, parse_bootstrap, reach_cluster
from odradek.client.connection import BrokerConnection, ConnectFailed, ConnectionSecurity
from odradek.client.types import BrokerAddress, ClusterMetadata, PartitionMetadata, TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import RETRIABLE, ErrorCode, KafkaError
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)

_BACKOFF_S = 0.1
_READ_UNCOMMITTED = 0
_READ_COMMITTED = 1
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE})
_TOPIC_ADMIN_OK = frozenset({ErrorCode.NONE})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One partition of a Fetch response; `records` holds whole batches plus maybe a partial one."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview | bytes
    aborted_transactions: tuple[tuple[int, int], ...] = ()  # (producer id, first offset): read_committed


class _Retry(Exception):
    """Internal: the attempt failed in a way worth retrying after a metadata refresh."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class KafkaClient:
    """Blocking client of one Kafka cluster."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "odradek-client",
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        read_committed: bool = False,
        security: ConnectionSecurity | None = None,
    ):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self._security = security
        self._client_id = client_id
        self._isolation_level = _READ_COMMITTED if read_committed else _READ_UNCOMMITTED
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._by_address: dict[tuple[str, int], BrokerConnection] = {}
        self._cluster: ClusterMetadata | None = None

    @classmethod
    def connect(
        cls,
        bootstrap_servers: str,
        *,
        retry_for_s: float,
        on_retry: Callable[[str], None],
        client_id: str = "odradek-client",
        timeout_s: float = 30.0,
        security: ConnectionSecurity | None = None,
    ) -> KafkaClient:
        """A client that has reached a bootstrap server, retrying for `retry_for_s` (announced through
        `on_retry`); raises BrokerUnreachable with a one-line message when none answers. Its later
        connections' setup is bounded by the same window (at least 1 s)."""
        client = cls(
            bootstrap_servers,
            client_id=client_id,
            timeout_s=timeout_s,
            connect_timeout_s=max(retry_for_s, 1.0),
            security=security,
        )
        try:
            reach_cluster(client, retry_for_s=retry_for_s, on_retry=on_retry)
        except BaseException:
            client.close()
            raise
        return client

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._by_address.values():
            connection.close()
        self._by_address.clear()

    # -- connections ---------------------------------------------------------------------------

    def connect_to(self, host: str, port: int, *, connect_timeout_s: float | None = None) -> BrokerConnection:
        """The open connection to `host:port`, opened now (within `connect_timeout_s`, by default the
        client's) if there is none; raises ConnectFailed."""
        connection = self._by_address.get((host, port))
        if connection is None or connection.closed:
            connection = BrokerConnection(
                host,
                port,
                client_id=self._client_id,
                timeout_s=self.timeout_s,
                connect_timeout_s=self.connect_timeout_s if connect_timeout_s is None else connect_timeout_s,
                security=self._security,
            )
            self._by_address[(host, port)] = connection
        return connection

    def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one, else the first bootstrap or known broker that answers."""
        known = [addr for addr, conn in self._by_address.items() if not conn.closed]
        candidates = known + [b for b in self.bootstrap if b not in known]
        if self._cluster is not None:
            candidates += [(b.host, b.port) for b in self._cluster.brokers.values()]
        failures = []
        for host, port in dict.fromkeys(candidates):
            try:
                return self.connect_to(host, port)
            except ConnectFailed as exc:
                failures.append(exc)
        raise BrokerUnreachable(failures)

    def _broker_connection(self, broker: BrokerAddress) -> BrokerConnection:
        return self.connect_to(broker.host, broker.port)

    def _with_retries(self, attempt: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return attempt()
            except (_Retry, OSError) as exc:
                cause = exc.cause if isinstance(exc, _Retry) else exc
                hopeless = isinstance(cause, ConnectFailed | BrokerUnreachable) and not cause.retriable
                if hopeless or time.monotonic() + _BACKOFF_S > deadline:
                    raise cause from None
                time.sleep(_BACKOFF_S)
                self._cluster = None

    def request(self, api_key: int, message: Any) -> Any:
        """Send `message` to any broker, retrying a broken connection until the client's timeout."""

        def attempt() -> Any:
            return self.any_connection().request(api_key, message)

        return self._with_retries(attempt)

    # -- metadata --------------------------------------------------------------------------------

    def metadata(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Fresh metadata for `topics` (every topic when None); merged into the cached metadata."""
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        response = self.request(ApiKey.METADATA, request)
        cluster = _cluster_from(response)
        old = self._cluster
        if topics is None or old is None:
            self._cluster = cluster
        else:
            kept = {t: p for t, p in old.topics.items() if t not in topics}
            self._cluster = ClusterMetadata(
                cluster.brokers, {**kept, **cluster.topics}, cluster.topic_errors, cluster.internal_topics
            )
        return cluster

    def partition_count(self, topic: str) -> int:
        """Number of partitions of `topic` per the cached metadata (refreshed when unknown); 0 if none."""
        if self._cluster is None or topic not in self._cluster.topics:
            self.metadata([topic])
        assert self._cluster is not None
        return len(self._cluster.partitions_of(topic))

    def _leaders(self, tps: Iterable[TopicPartition]) -> dict[BrokerAddress, list[TopicPartition]]:
        """Group partitions by leader; a partition with no known leader raises _Retry or KafkaError."""
        tps = list(tps)
        cluster = self._cluster
        if cluster is None or any(cluster.leader_of(tp) is None for tp in tps):
            cluster = self.metadata(sorted({tp.topic for tp in tps}))
        grouped: dict[BrokerAddress, list[TopicPartition]] = defaultdict(list)
        for tp in tps:
            leader = cluster.leader_of(tp)
            if leader is None:
                _raise_for_missing(cluster, tp)
            grouped[leader].append(tp)
        return grouped

    # -- offsets -------------------------------------------------------------------------------

    def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offsets for -2 (earliest), -1 (latest) or a timestamp, per partition."""
        result: dict[TopicPartition, int] = {}

        def attempt() -> dict[TopicPartition, int]:
            pending = {tp: ts for tp, ts in timestamps.items() if tp not in result}
            for leader, tps in self._leaders(pending).items():
                response = self._broker_connection(leader).request(
                    ApiKey.LIST_OFFSETS, _list_offsets_request(tps, pending, self._isolation_level)
                )
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        _check(part.error_code, tp)
                        result[tp] = part.offset
            return result

        return self._with_retries(attempt)

    # -- fetch ---------------------------------------------------------------------------------

    def fetch(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        max_bytes: int = 8 << 20,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        reuse_buffer: bool = False,
    ) -> FetchResult:
        """Records of `tp` from `offset`: at least one whole batch if any exists, about `max_bytes`;
        the broker answers once `min_bytes` are there or `max_wait_ms` passed.
        With `reuse_buffer`, `records` is valid only until the next such fetch on this client."""
        request = _fetch_request(tp, offset, max_bytes, max_wait_ms, min_bytes, self._isolation_level)
        return self._with_retries(lambda: self._fetch_once(tp, request, reuse_buffer))

    def _fetch_once(self, tp: TopicPartition, request: FetchRequest, reuse_buffer: bool) -> FetchResult:
        try:
            leader = next(iter(self._leaders([tp])))
        except KafkaError as exc:
            return FetchResult(exc.code, -1, -1, b"")
        connection = self._broker_connection(leader)
        response = connection.request(ApiKey.FETCH, request, reuse_buffer=reuse_buffer)
        while not response.responses and response.throttle_time_ms > 0:  # throttled: answered empty
            time.sleep(response.throttle_time_ms / 1000)
            response = connection.request(ApiKey.FETCH, request, reuse_buffer=reuse_buffer)
        if response.error_code:
            _check(response.error_code, tp)
        part = response.responses[0].partitions[0]
        if part.error_code in _LEADER_ERRORS:
            raise _Retry(KafkaError(part.error_code, f"fetching {tp}"))
        aborted = tuple((t.producer_id, t.first_offset) for t in part.aborted_transactions or ())
        return FetchResult(
            part.error_code, part.high_watermark, part.log_start_offset, part.records or b"", aborted
        )

    # -- produce -------------------------------------------------------------------------------

    def produce(
        self,
        batches: Mapping[TopicPartition, bytes],
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
    ) -> dict[TopicPartition, int]:
        """Append one RecordBatch (or several, concatenated) per partition; return base offsets.
        Transactional batches name their producer's `transactional_id`."""
        if acks not in (1, -1):
            raise ValueError("acks must be 1 or -1 (all); acks=0 gets no answer to check")
        result: dict[TopicPartition, int] = {}

        def attempt() -> dict[TopicPartition, int]:
            pending = {tp: data for tp, data in batches.items() if tp not in result}
            for leader, tps in self._leaders(pending).items():
                request = _produce_request(tps, pending, acks, timeout_ms, transactional_id)
                response = self._broker_connection(leader).request(ApiKey.PRODUCE, request)
                for topic in response.responses:
                    for part in topic.partition_responses:
                        tp = TopicPartition(topic.name, part.index)
                        _check(part.error_code, tp, part.error_message)
                        result[tp] = part.base_offset
            return result

        return self._with_retries(attempt)

    # -- administration ------------------------------------------------------------------------

    def create_topics(
        self,
        partitions: Mapping[str, int],
        *,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        timeout_ms: int = 30_000,
    ) -> None:
        """Create topics with the given partition counts; an existing topic is an error."""
        topic_configs = [CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()]
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=count,
                    replication_factor=replication_factor,
                    configs=list(topic_configs),
                )
                for name, count in partitions.items()
            ],
            timeout_ms=timeout_ms,
        )
        response = self.request(ApiKey.CREATE_TOPICS, request)
        for topic in response.topics:
            _check_admin(topic.error_code, topic.name, topic.error_message)
        self._cluster = None

    def delete_topics(self, topics: Sequence[str], *, timeout_ms: int = 30_000) -> None:
        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=t) for t in topics],
            topic_names=list(topics),
            timeout_ms=timeout_ms,
        )
        response = self.request(ApiKey.DELETE_TOPICS, request)
        for topic in response.responses:
            _check_admin(topic.error_code, topic.name or "", topic.error_message)
        self._cluster = None

    def create_partitions(self, counts: Mapping[str, int], *, timeout_ms: int = 30_000) -> None:
        """Grow topics to the given total partition counts."""
        request = CreatePartitionsRequest(
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(name=t, count=c) for t, c in counts.items()
            ],
            timeout_ms=timeout_ms,
        )
        response = self.request(ApiKey.CREATE_PARTITIONS, request)
        for result in response.results:
            _check_admin(result.error_code, result.name, result.error_message)
        self._cluster = None

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int = 30_000
    ) -> dict[TopicPartition, int]:
        """Advance log start offsets to `before` (-1: the high watermark); return the low watermarks."""
        result: dict[TopicPartition, int] = {}

        def attempt() -> dict[TopicPartition, int]:
            pending = {tp: off for tp, off in before.items() if tp not in result}
            for leader, tps in self._leaders(pending).items():
                request = _delete_records_request(tps, pending, timeout_ms)
                response = self._broker_connection(leader).request(ApiKey.DELETE_RECORDS, request)
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        _check(part.error_code, tp)
                        result[tp] = part.low_watermark
            return result

        return self._with_retries(attempt)


def _cluster_from(response: Any) -> ClusterMetadata:
    brokers = {b.node_id: BrokerAddress(b.node_id, b.host, b.port) for b in response.brokers}
    topics: dict[str, tuple[PartitionMetadata, ...]] = {}
    errors: dict[str, int] = {}
    internal = set()
    for topic in response.topics:
        name = topic.name or ""
        if topic.error_code:
            errors[name] = topic.error_code
        if topic.is_internal:
            internal.add(name)
        parts = sorted(topic.partitions, key=lambda p: p.partition_index)
        topics[name] = tuple(
            PartitionMetadata(name, p.partition_index, p.leader_id, p.leader_epoch, p.error_code)
            for p in parts
        )
    return ClusterMetadata(brokers, {t: p for t, p in topics.items() if p}, errors, frozenset(internal))


def _raise_for_missing(cluster: ClusterMetadata, tp: TopicPartition) -> NoReturn:
    known = cluster.partitions_of(tp.topic)
    if not known or all(p.partition != tp.partition for p in known):
        code = cluster.topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if code in _LEADER_ERRORS:
            raise _Retry(KafkaError(code, f"no leader for {tp}"))
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
    raise _Retry(KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {tp}"))


def _check(code: int, tp: TopicPartition, message: str | None = None) -> None:
    if code == ErrorCode.NONE:
        return
    error = KafkaError(code, f"{tp}: {message}" if message else str(tp))
    if code in RETRIABLE and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise _Retry(error)
    raise error


def _check_admin(code: int, name: str, message: str | None) -> None:
    if code not in _TOPIC_ADMIN_OK:
        raise KafkaError(code, f"{name}: {message}" if message else name)


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(tps):
        grouped[tp.topic].append(tp.partition)
    return grouped


def _fetch_request(
    tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int, min_bytes: int, isolation_level: int
) -> FetchRequest:
    partition = FetchRequest.FetchPartition(
        partition=tp.partition, fetch_offset=offset, partition_max_bytes=max_bytes
    )
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[partition])],
    )


def _list_offsets_request(
    tps: list[TopicPartition], timestamps: Mapping[TopicPartition, int], isolation_level: int
) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, timestamp=timestamps[TopicPartition(topic, p)]
                    )
                    for p in partitions
                ],
            )
            for topic, partitions in _by_topic(tps).items()
        ],
    )


def _produce_request(
    tps: list[TopicPartition],
    data: Mapping[TopicPartition, bytes],
    acks: int,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=data[TopicPartition(topic, p)])
                    for p in partitions
                ],
            )
            for topic, partitions in _by_topic(tps).items()
        ],
    )


def _delete_records_request(
    tps: list[TopicPartition], before: Mapping[TopicPartition, int], timeout_ms: int
) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        timeout_ms=timeout_ms,
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic,
                partitions=[
                    DeleteRecordsRequest.DeleteRecordsPartition(
                        partition_index=p, offset=before[TopicPartition(topic, p)]
                    )
                    for p in partitions
                ],
            )
            for topic, partitions in _by_topic(tps).items()
        ],
    )
