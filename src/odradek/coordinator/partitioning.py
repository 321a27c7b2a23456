"""Which partition of a coordinator's internal topic coordinates a key: a group's of
`__consumer_offsets`, a transactional id's of `__transaction_state` (the two names live here).

Owns: Java's `String.hashCode` over UTF-16 code units and Kafka's mapping
`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, where `Utils.abs` is
`h & 0x7fffffff` (not `Math.abs`, which would leave `Integer.MIN_VALUE` negative).

Invariant: the mapping is bit-for-bit Kafka's, so a group keeps its coordinator partition when a
data directory moves between odradek and Kafka, and clients computing it agree.
Callers: the group and transaction coordinators, the FindCoordinator handler, the partition
leaders' transaction verification, the broker.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


def java_string_hash(value: str) -> int:
    """`String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, as a signed int32."""
    h = 0
    units = value.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates `group_id`."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions
