"""How far the reassignments in progress have got, for `reassign-partitions --verify`.

Owns one report line on stderr (stdout keeps Kafka's exact --verify output, which scripts parse):

    Progress: D of N partition reassignments complete; replicas being added hold X of Y bytes (P%)

D of N counts the partitions of the reassignment file no longer in progress. The bytes are those of
the logs of the replicas being added (DescribeLogDirs on each adding broker) against their leader's
log (DescribeLogDirs on the leader), summed over the partitions in progress: a replica being added
copies its leader's log from its start, so the share is how much of the copy is done. A broker that
cannot be asked counts as holding nothing. Kafka's tool has no such line.

Callers: cli/reassign_partitions.py.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TextIO

from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from odradek.protocol.topic_partition import TopicPartition


def report(
    client: KafkaClient,
    targets: Collection[TopicPartition],
    adding: Mapping[TopicPartition, Iterable[int]],
    out: TextIO | None = None,
) -> None:
    """Print the progress line for the reassignment of `targets`, `adding` being the replicas being
    added of those still in progress."""
    moving = {tp: list(brokers) for tp, brokers in adding.items() if tp in targets}
    done = len(targets) - len(moving)
    line = f"Progress: {done} of {len(targets)} partition reassignments complete"
    if moving:
        copied, total = _copied_bytes(client, moving)
        share = 100 * copied // total if total else 100
        line += f"; replicas being added hold {copied} of {total} bytes ({share}%)"
    print(line, file=out or sys.stderr)


def _copied_bytes(client: KafkaClient, adding: Mapping[TopicPartition, list[int]]) -> tuple[int, int]:
    cluster = client.metadata(sorted({topic for topic, _ in adding}))
    leaders = {(p.topic, p.partition): p.leader for ps in cluster.topics.values() for p in ps}
    asked: dict[int, set[TopicPartition]] = {}
    for tp, brokers in adding.items():
        for broker in (leaders.get(tp, -1), *brokers):
            asked.setdefault(broker, set()).add(tp)
    sizes = {broker: _sizes(client, cluster.brokers.get(broker), tps) for broker, tps in asked.items()}
    copied = sum(sizes[b].get(tp, 0) for tp, brokers in adding.items() for b in brokers)
    total = sum(sizes[leaders.get(tp, -1)].get(tp, 0) * len(brokers) for tp, brokers in adding.items())
    return copied, total


def _sizes(client: KafkaClient, broker: Any, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
    """The size of each of `partitions` on `broker` (its largest log dir copy); {} if unreachable."""
    if broker is None:
        return {}
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    request = DescribeLogDirsRequest(
        topics=[DescribeLogDirsRequest.DescribableLogDirTopic(t, p) for t, p in by_topic.items()]
    )
    try:
        response = client.connect_to(broker.host, broker.port).request(ApiKey.DESCRIBE_LOG_DIRS, request)
    except OSError:
        return {}
    sizes: dict[TopicPartition, int] = {}
    for result in response.results:
        for topic in result.topics:
            for p in topic.partitions:
                key = TopicPartition(topic.name, p.partition_index)
                sizes[key] = max(sizes.get(key, 0), p.partition_size)
    return sizes
