"""The broker's metadata cache (Kafka's MetadataCache): what the controller last told this broker.

Owns the broker's read-side view of the cluster: live brokers with their endpoints and racks, the
controller id, and per topic its id and partitions (leader, leader epoch, replicas, ISR, offline
replicas, controller epoch, partition epoch), plus each topic's config overrides.

Fed only by:
- UpdateMetadata (`update_metadata`): brokers and controller are replaced by the request's; each
  partition state in it replaces the cached one, unless it is older (the same topic id, a lower
  partition epoch: a late copy of a request the controller sent again on a new connection; Kafka's
  ZooKeeper-mode cache takes it), and a partition whose leader is LEADER_DURING_DELETE is removed (a
  topic with no partition left goes). The broker has already refused a request from
  a controller epoch older than the newest it has seen (STALE_CONTROLLER_EPOCH, Kafka's rule).
- topic config changes (`update_topic_configs`): in ZooKeeper mode every broker hears them through
  the `/config/changes` notifications, in local mode from the store's watch. A topic's configs are
  forgotten when its last partition leaves the cache.

Reads answer every question the handlers and the group coordinator ask: `brokers()`,
`controller_id()`, `topics()`, `topic(name)`, `topic_by_id(id)`, `partition(name, index)`,
`has_leaders(name, indexes)`. `changed()` wakes waiters (CreateTopics / DeleteTopics waiting for
the controller) after every update.

Invariants: values handed out are immutable snapshots (`TopicMetadata`); only the event loop calls
it. Callers: the broker (wiring, the control-plane handlers), request handlers, the group coordinator,
the ReplicaManager (is a partition known?).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from odradek.controller.metadata import (
    INTERNAL_TOPICS,
    LEADER_DURING_DELETE,
    NO_LEADER,
    BrokerInfo,
    Endpoint,
    PartitionState,
    TopicMetadata,
)
from odradek.controller.waiters import Waiters
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

_NONE_CACHED = PartitionState(NO_LEADER, -1, (), (), -1, -1)  # no state is older than it


class MetadataCache:
    """See the module docstring."""

    def __init__(self, broker_id: int, cluster_id: str = "") -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._controller_id = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._configs: dict[str, Mapping[str, str]] = {}
        self.changed = Waiters()
        # bumped by every UpdateMetadata: readers cache what they derive from the topics by it
        self.version = 0

    # -- updates ---------------------------------------------------------------------------------

    def update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """Apply an UpdateMetadata request (see the module docstring); it was fenced by controller
        and broker epoch in server/control_plane.py."""
        self._controller_id = request.controller_id
        self._brokers = {b.id: _broker(b) for b in request.live_brokers}
        for topic in request.topic_states:
            self._apply_topic(topic)
        self.version += 1
        self.changed.notify()
        return UpdateMetadataResponse()

    def _apply_topic(self, topic: UpdateMetadataRequest.UpdateMetadataTopicState) -> None:
        name = topic.topic_name
        cached = self._topics.get(name)
        partitions = dict(cached.partitions) if cached is not None else {}
        same_topic = cached is not None and cached.topic_id == topic.topic_id
        for p in topic.partition_states:
            if p.leader == LEADER_DURING_DELETE:
                partitions.pop(p.partition_index, None)
            elif (
                same_topic and p.zk_version < partitions.get(p.partition_index, _NONE_CACHED).partition_epoch
            ):
                continue  # an older state than the one cached
            else:
                partitions[p.partition_index] = PartitionState(
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    controller_epoch=p.controller_epoch,
                    partition_epoch=p.zk_version,
                    offline_replicas=tuple(p.offline_replicas),
                )
        if cached is not None:
            self._by_id.pop(cached.topic_id, None)
        if not partitions:
            self._topics.pop(name, None)
            self._configs.pop(name, None)
            return
        self._topics[name] = TopicMetadata(
            name, topic.topic_id, partitions, self._configs.get(name, {}), name in INTERNAL_TOPICS
        )
        self._by_id[topic.topic_id] = name

    def update_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """A topic's config overrides changed (or became known)."""
        self._configs[name] = dict(configs)
        cached = self._topics.get(name)
        if cached is not None:
            self._topics[name] = TopicMetadata(
                name, cached.topic_id, cached.partitions, self._configs[name], cached.is_internal
            )
        self.changed.notify()

    def topic_configs(self, name: str) -> Mapping[str, str]:
        """A topic's config overrides (known as soon as the topic is stored, before its partitions)."""
        return self._configs.get(name, {})

    # -- reads -----------------------------------------------------------------------------------

    def brokers(self) -> list[BrokerInfo]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def controller_id(self) -> int:
        return self._controller_id

    def topics(self) -> dict[str, TopicMetadata]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        name = self._by_id.get(topic_id)
        return self._topics.get(name) if name is not None else None

    def partition(self, name: str, index: int) -> PartitionState | None:
        topic = self._topics.get(name)
        return topic.partitions.get(index) if topic is not None else None

    def contains_partition(self, name: str, index: int) -> bool:
        return self.partition(name, index) is not None

    def has_leaders(self, name: str, indexes: Iterable[int]) -> bool:
        """Whether every partition of `indexes` is cached with a live leader."""
        topic = self._topics.get(name)
        if topic is None:
            return False
        for index in indexes:
            state = topic.partitions.get(index)
            if state is None or state.leader == NO_LEADER or state.leader not in self._brokers:
                return False
        return True


def _broker(broker: UpdateMetadataRequest.UpdateMetadataBroker) -> BrokerInfo:
    endpoints = tuple(Endpoint(e.listener, e.host, e.port) for e in broker.endpoints)
    return BrokerInfo(broker.id, endpoints, broker.rack)
