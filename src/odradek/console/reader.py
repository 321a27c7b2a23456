"""What the web console shows, read from a cluster over the Kafka protocol.

Owns one blocking `KafkaClient` on a bootstrap address and one `GroupAdmin` (cli/group_admin.py)
over it, and turns their answers into the values the pages draw: the brokers and the controller
(Metadata), each topic's partitions with leader, replicas, ISR and start / end offsets (Metadata,
ListOffsets), the consumer groups with state, members, assignments, committed offsets and lag
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets), the client quotas (DescribeClientQuotas),
and the size of every replica (DescribeLogDirs to each broker); and, for the page modules' own
requests, its blocking client and group admin client.

Invariants: every call blocks (the console runs them on one worker thread of its own, never on an
event loop: a broker serving its own console answers these requests on its loop meanwhile); the
clients are used from that one thread only. Nothing is cached between calls.

Callers: console/sessions.py (one reader per session), the page modules (through `PageContext.run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.client import (
    AuthenticationFailed,
    BrokerUnreachable,
    ConnectionSecurity,
    KafkaClient,
    TopicPartition,
)
from odradek.client.group_admin import GroupAdmin, GroupListing, GroupReport
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, check
from odradek.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from odradek.protocol.messages.metadata import MetadataRequest

EARLIEST, LATEST = -2, -1
ReplicaSizes = dict[tuple[str, int], dict[int, int]]  # (topic, partition) -> broker id -> bytes


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class Partition:
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start: int = -1
    end: int = -1


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    internal: bool
    partitions: tuple[Partition, ...]

    @property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions if len(p.isr) < len(p.replicas))


@dataclass(frozen=True, slots=True)
class Cluster:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[Broker, ...]
    topics: tuple[Topic, ...]


@dataclass(frozen=True, slots=True)
class ClientQuota:
    """A client quota entity (`user` / `client-id` -> name, None for the default) and its quotas."""

    entity: dict[str, str | None]
    values: dict[str, float]


class ClusterReader:
    """Blocking reads of one cluster; see the module docstring."""

    def __init__(
        self, bootstrap: str, timeout_s: float = 10.0, security: ConnectionSecurity | None = None
    ) -> None:
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self._security = security
        self._client: KafkaClient | None = None
        self._admin: GroupAdmin | None = None

    def _clients(self) -> tuple[KafkaClient, GroupAdmin]:
        if self._client is None or self._admin is None:
            self._client = KafkaClient(
                self._bootstrap,
                client_id="odradek-console",
                timeout_s=self._timeout_s,
                security=self._security,
            )
            self._admin = GroupAdmin(self._client, self._timeout_s)
        return self._client, self._admin

    def kafka(self) -> KafkaClient:
        """The reader's blocking client (connected as the session's principal), for a page module's
        own requests; used from the console lane only."""
        return self._clients()[0]

    def group_admin(self) -> GroupAdmin:
        """The reader's group admin client (cli/group_admin.py) over the same connections."""
        return self._clients()[1]

    def check(self) -> None:
        """Connect (authenticating, with a SASL security) and read the cluster's metadata; raises
        AuthenticationFailed when the cluster refuses the credentials."""
        try:
            connection = self._clients()[0].any_connection()
        except BrokerUnreachable as exc:
            refused = [f.__cause__ for f in exc.failures if isinstance(f.__cause__, AuthenticationFailed)]
            if refused:
                raise refused[0] from None
            raise
        connection.request(ApiKey.METADATA, MetadataRequest(topics=[]))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._admin = None

    def cluster(self, *, offsets: bool = True) -> Cluster:
        """Brokers, controller and every topic; with `offsets`, each partition's start and end."""
        client, _ = self._clients()
        response = client.any_connection().request(ApiKey.METADATA, MetadataRequest(topics=None))
        topics = tuple(sorted((_topic(t) for t in response.topics), key=lambda t: t.name))
        if offsets:
            topics = self._with_offsets(client, topics)
        brokers = tuple(
            sorted((Broker(b.node_id, b.host, b.port, b.rack) for b in response.brokers), key=_id)
        )
        return Cluster(response.cluster_id, response.controller_id, brokers, topics)

    def _with_offsets(self, client: KafkaClient, topics: tuple[Topic, ...]) -> tuple[Topic, ...]:
        led = [TopicPartition(t.name, p.index) for t in topics for p in t.partitions if p.leader >= 0]
        starts = client.list_offsets(dict.fromkeys(led, EARLIEST)) if led else {}
        ends = client.list_offsets(dict.fromkeys(led, LATEST)) if led else {}
        return tuple(
            Topic(
                t.name,
                t.internal,
                tuple(
                    Partition(
                        p.index,
                        p.leader,
                        p.replicas,
                        p.isr,
                        starts.get(TopicPartition(t.name, p.index), -1),
                        ends.get(TopicPartition(t.name, p.index), -1),
                    )
                    for p in t.partitions
                ),
            )
            for t in topics
        )

    def quotas(self) -> list[ClientQuota]:
        """Every client quota entity with its quotas (DescribeClientQuotas matching everything)."""
        client, _ = self._clients()
        response = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, DescribeClientQuotasRequest())
        check(response.error_code, response.error_message)
        return [
            ClientQuota(
                {e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values}
            )
            for entry in response.entries or ()
        ]

    def replica_sizes(self) -> ReplicaSizes:
        """The bytes of every replica, by (topic, partition) then broker, from each broker's
        DescribeLogDirs; the future replica of a move between log dirs is left out, and so is a
        broker that does not answer (its replicas have no size here)."""
        client, _ = self._clients()
        sizes: ReplicaSizes = {}
        for broker_id, broker in client.metadata([]).brokers.items():
            try:
                response = client.connect_to(broker.host, broker.port).request(
                    ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None)
                )
            except (ConnectionError, KafkaError):
                continue
            for log_dir in response.results:
                for topic in log_dir.topics if log_dir.error_code == ErrorCode.NONE else ():
                    for p in topic.partitions:
                        if not p.is_future_key:
                            sizes.setdefault((topic.name, p.partition_index), {})[broker_id] = (
                                p.partition_size
                            )
        return sizes

    def groups(self) -> list[GroupListing]:
        return self._clients()[1].list_groups()

    def group(self, group_id: str) -> GroupReport:
        return self._clients()[1].describe(group_id)


def _id(broker: Broker) -> int:
    return broker.node_id


def _topic(topic: Any) -> Topic:
    partitions = tuple(
        sorted(
            (
                Partition(p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
                for p in topic.partitions
            ),
            key=lambda p: p.index,
        )
    )
    return Topic(topic.name or "", bool(topic.is_internal), partitions)
