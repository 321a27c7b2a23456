"""Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): a bound on the bytes a
reassignment's replicas copy per second, one quota for this broker as leader, one as follower.

Owns, per side: the rate (`leader.replication.throttled.rate` / `follower.replication.throttled.rate`,
dynamic broker configs in bytes/s; unset: unlimited), the throttled partitions of this broker (the
topic configs `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
`*` for every partition, else `partition:broker` items, of which the items naming this broker count)
and the bytes recently copied for them.

Behaviour (Kafka's): the bytes of throttled partitions are recorded as they are sent (leader) or
fetched (follower); the quota is exceeded while their rate over the last
`WINDOWS` windows of `WINDOW_S` (replication.quota.window.num and .size.seconds, Kafka's defaults
11 and 1 s; the rate is taken over at least `WINDOWS - 1` windows) is above the configured one. While
it is exceeded the leader sends nothing for a throttled partition to a follower outside its ISR,
and a follower outside the ISR leaves its throttled partitions out of its fetches; in-sync replicas
are never held back. One read may pass the rate (a fetch takes up to replica.fetch.max.bytes); the
next ones wait until the average is back under it, so a long move keeps to the rate.

Invariants: lives on the broker's event loop; the clock is monotonic.
Callers: the ReplicaManager (leader side, follower fetches) and its fetchers (follower side); the
broker sets rates and throttled replicas as broker and topic configs change.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

WINDOW_S = 1.0
WINDOWS = 11
ALL_PARTITIONS = "*"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED = 2**63 - 1  # Kafka's default rate: Long.MAX_VALUE bytes/s


class ReplicationQuota:
    """One side's throttle; see the module docstring."""

    def __init__(self, broker_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.rate = UNLIMITED
        self._clock = clock
        self._throttled: dict[str, frozenset[int] | None] = {}  # None: every partition
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def set_throttled_replicas(self, topic: str, value: str) -> None:
        """A topic's `*.replication.throttled.replicas` config (empty: none throttled here)."""
        value = value.strip()
        if value == ALL_PARTITIONS:
            self._throttled[topic] = None
            return
        partitions = frozenset(_partitions_of(value, self.broker_id))
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    @property
    def throttles_any(self) -> bool:
        """Whether any partition's replicas here are throttled."""
        return bool(self._throttled)

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is None or partition in partitions

    def record(self, size: int) -> None:
        """`size` bytes of throttled partitions were copied now."""
        if size > 0 and self.rate != UNLIMITED:
            self._samples.append((self._clock(), size))

    def exceeded(self) -> bool:
        """Whether the recent rate of throttled bytes is above the configured rate."""
        if self.rate == UNLIMITED:
            return False
        now = self._clock()
        span = WINDOW_S * WINDOWS
        while self._samples and self._samples[0][0] < now - span:
            self._samples.popleft()
        if not self._samples:
            return False
        elapsed = max(now - self._samples[0][0], WINDOW_S * (WINDOWS - 1))
        return sum(size for _, size in self._samples) / elapsed > self.rate


def _partitions_of(value: str, broker_id: int) -> list[int]:
    """The partitions of `partition:broker` items naming `broker_id` (malformed items skipped:
    the topic config's validation refuses them before they are stored)."""
    partitions = []
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if partition.strip().isdigit() and broker.strip().isdigit() and int(broker) == broker_id:
            partitions.append(int(partition))
    return partitions
