"""Share groups on a three-broker ZooKeeper cluster: the share-partition's leader keeps its state
through the share coordinator of another broker (WriteShareGroupState / ReadShareGroupState on the
inter-broker listener), and when that leader is killed the partition's new leader reads the state
back: no acknowledged record is delivered again, the unacknowledged ones are."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from odradek.coordinator.partitioning import partition_for
from odradek.coordinator.share_coordinator import SHARE_STATE_TOPIC
from odradek.coordinator.share_records import StateKey
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic, produce_all
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.server.raw_client import RawClient
from tests.share.test_wire import ACCEPT, SETTINGS, Member, Retry, acquired, settled_fetch

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3


def topic_id(bootstrap: str, name: str) -> Any:
    with RawClient(bootstrap) as client:
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)])
        (topic,) = client.call(ApiKey.METADATA, 12, request).topics
    return topic.topic_id


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    state = cluster.state(topic, partition)
    return int(state["leader"]) if state is not None else -1


def full_isr(cluster: LocalCluster, topic: str, partition: int) -> bool:
    state = cluster.state(topic, partition)
    return state is not None and len(state["isr"]) == 3


def state_partition(group: str, tid: Any) -> int:
    return partition_for(StateKey(group, tid, 0).coordinator_key(), STATE_PARTITIONS)


def poll(member: Member, want: set[int], deadline_s: float = 60.0) -> dict[int, tuple[bytes, int]]:
    got: dict[int, tuple[bytes, int]] = {}
    deadline = time.monotonic() + deadline_s
    while not want <= set(got) and time.monotonic() < deadline:
        try:
            got |= acquired(member.fetch())
        except Retry:
            time.sleep(0.2)
    return got


def test_state_kept_by_another_broker_survives_the_partition_leaders_death(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(
        **{
            **SETTINGS,
            "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
            "share.coordinator.state.topic.replication.factor": 3,
            "share.coordinator.state.topic.min.isr": 2,
            "replica.fetch.backoff.ms": 200,
        }
    )
    create_replicated_topic(cluster, "queue")
    leader = leader_of(cluster, "queue")
    tid = topic_id(cluster.brokers[leader].bootstrap, "queue")
    bootstrap = cluster.brokers[leader].bootstrap
    warm = Member(bootstrap, "warm-up", tid)  # creates __share_group_state
    try:
        assert settled_fetch(warm) == {}
    finally:
        warm.close()
    for p in range(STATE_PARTITIONS):
        eventually(
            functools.partial(full_isr, cluster, SHARE_STATE_TOPIC, p), 30, "the state partitions' ISR"
        )
    group = next(
        g
        for g in (f"queue-readers-{uuid.uuid4().hex[:6]}" for _ in range(100))
        if leader_of(cluster, SHARE_STATE_TOPIC, state_partition(g, tid)) != leader
    )
    first = Member(bootstrap, group, tid)
    try:
        assert settled_fetch(first) == {}  # the share-partition starts at the log end
        assert produce_all(cluster, "queue", [b"job-%d" % i for i in range(10)]) == []
        assert set(poll(first, set(range(10)))) == set(range(10))
        response = first.acknowledge([(0, 4, ACCEPT)])
        assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.NONE]
    finally:
        first.close()

    cluster.brokers[leader].kill()

    def moved() -> int | None:
        now = leader_of(cluster, "queue")
        return now if now not in (-1, leader) else None

    new_leader = eventually(moved, CLUSTER_SESSION_TIMEOUT_MS / 1000 + 15, "a new leader of queue-0")
    second = Member(cluster.brokers[new_leader].bootstrap, group, tid)
    try:
        again = poll(second, set(range(5, 10)))
        assert set(again) == set(range(5, 10))
        assert {v for v, _ in again.values()} == {b"job-%d" % i for i in range(5, 10)}
    finally:
        second.close()
