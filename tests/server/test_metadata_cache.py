"""The broker's metadata cache: contents after UpdateMetadata, deletion markers, stale controllers,
topic configs."""

from __future__ import annotations

import uuid

from odradek.controller.channel import ControllerIdentity, update_metadata_request
from odradek.controller.metadata import LEADER_DURING_DELETE, BrokerInfo, Endpoint, PartitionState
from odradek.protocol.errors import ErrorCode
from odradek.server.metadata_cache import MetadataCache

B0 = BrokerInfo(0, (Endpoint("PLAINTEXT", "h0", 9092), Endpoint("INTERNAL", "i0", 9093)), "r1")
B1 = BrokerInfo(1, (Endpoint("PLAINTEXT", "h1", 9092),))
ORDERS = uuid.uuid4()


def update(controller_epoch: int, topics, brokers=(B0, B1), controller_id: int = 1):
    return update_metadata_request(ControllerIdentity(controller_id, controller_epoch), topics, brokers)


def test_update_metadata_fills_brokers_controller_and_partitions():
    cache = MetadataCache(0)
    states = {0: PartitionState(1, 4, (1, 2), (1,), 3, 7), 1: PartitionState(0, 2, (0, 1), (0, 1), 3, 2)}
    assert cache.update_metadata(update(3, {"orders": (ORDERS, states)})).error_code == ErrorCode.NONE
    assert cache.brokers() == [B0, B1] and cache.brokers()[0].endpoint("INTERNAL").host == "i0"
    assert cache.controller_id() == 1
    topic = cache.topic("orders")
    assert topic is not None and cache.topic_by_id(ORDERS) is topic and not topic.is_internal
    first = topic.partitions[0]
    assert (first.leader, first.leader_epoch, first.replicas, first.isr) == (1, 4, (1, 2), (1,))
    assert (first.partition_epoch, first.offline_replicas) == (7, (2,))  # broker 2 is not live
    assert cache.has_leaders("orders", [0, 1]) and not cache.has_leaders("orders", [2])


def test_partition_updates_merge_and_deletion_markers_remove():
    cache = MetadataCache(0)
    first = {p: PartitionState(0, 0, (0,), (0,), 1, 0) for p in range(3)}
    cache.update_metadata(update(1, {"t": (ORDERS, first)}))
    cache.update_metadata(update(1, {"t": (ORDERS, {1: PartitionState(1, 1, (0, 1), (1,), 1, 1)})}))
    assert cache.partition("t", 1).leader == 1 and cache.partition("t", 0).leader == 0
    gone = {p: PartitionState(LEADER_DURING_DELETE, 0, (0,), (), 1, 0) for p in range(2)}
    cache.update_metadata(update(1, {"t": (ORDERS, gone)}))
    assert sorted(cache.topic("t").partitions) == [2]
    cache.update_metadata(update(1, {"t": (ORDERS, {2: gone[0]})}))
    assert cache.topic("t") is None and cache.topic_by_id(ORDERS) is None and cache.topic_configs("t") == {}


def test_an_older_partition_state_of_the_same_topic_does_not_replace_a_newer_one():
    """A late copy of an UpdateMetadata (the controller sent it again on a new connection, the first
    copy arrived after newer ones) leaves the newer state; a recreated topic (a new id) starts over."""
    cache = MetadataCache(0)
    shrunk, expanded = PartitionState(1, 3, (0, 1), (1,), 1, 5), PartitionState(1, 3, (0, 1), (0, 1), 1, 6)
    cache.update_metadata(update(1, {"t": (ORDERS, {0: expanded})}))
    cache.update_metadata(update(1, {"t": (ORDERS, {0: shrunk, 1: shrunk})}))
    assert cache.partition("t", 0).isr == (0, 1) and cache.partition("t", 1).isr == (1,)
    recreated = uuid.uuid4()
    cache.update_metadata(update(1, {"t": (recreated, {0: PartitionState(0, 0, (0,), (0,), 1, 0)})}))
    assert cache.topic("t").topic_id == recreated and cache.partition("t", 0).partition_epoch == 0


def test_topic_configs_are_known_before_and_after_the_partitions():
    cache = MetadataCache(0)
    cache.update_topic_configs("t", {"retention.ms": "5"})
    assert cache.topic_configs("t") == {"retention.ms": "5"}
    cache.update_metadata(update(1, {"t": (ORDERS, {0: PartitionState(0, 0, (0,), (0,), 1, 0)})}))
    assert cache.topic("t").configs == {"retention.ms": "5"}
    cache.update_topic_configs("t", {"cleanup.policy": "compact"})
    assert cache.topic("t").configs == {"cleanup.policy": "compact"}
    internal = {0: PartitionState(0, 0, (0,), (0,), 1, 0)}
    cache.update_metadata(update(1, {"__consumer_offsets": (uuid.uuid4(), internal)}))
    assert cache.topic("__consumer_offsets").is_internal
