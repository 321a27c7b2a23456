"""The counters the ReplicaManager keeps for the broker's metrics (server/metrics.py reads them).

Owns `TopicStats`, per topic: records and bytes appended as leader (Kafka's MessagesInPerSec,
BytesInPerSec), bytes read for consumers (BytesOutPerSec) and for follower replicas
(ReplicationBytesOutPerSec); and `IsrChanges`, the ISR shrinks and expansions of partitions that stay
led here (Kafka's IsrShrinksPerSec / IsrExpandsPerSec). Kafka counts only the changes its leader
asked for (AlterPartition); these also count the controller's own (a LeaderAndIsr that takes a dead
or shut down follower out of the ISR), which reach a leader first when zookeeper.session.timeout.ms
is below replica.lag.time.max.ms, as with Kafka's defaults.

Invariants: updated on the event loop where an append or read result is already at hand, a couple of
integer additions per partition with data; nothing here is computed, only counted. Counters only
grow; a topic's entry stays when the topic is deleted.

Callers: the ReplicaManager (updates), the metrics collector (reads at scrape time).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    replication_bytes_out: int = 0


class TopicStats(dict[str, TopicCounters]):
    """Topic name -> its counters, created on first use."""

    def __missing__(self, topic: str) -> TopicCounters:
        counters = self[topic] = TopicCounters()
        return counters


@dataclass(slots=True)
class IsrChanges:
    shrinks: int = 0
    expands: int = 0

    def record(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """An ISR change applied to a partition led here before and after it."""
        if len(after) < len(before):
            self.shrinks += 1
        elif len(after) > len(before):
            self.expands += 1
