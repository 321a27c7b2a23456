"""Reading the embedded "consumer" protocol: subscriptions and assignments.

Group membership treats protocol metadata and assignments as opaque bytes; only two questions
look inside them, and only for groups whose protocol type is `consumer`: which topics a group is
subscribed to (offset expiration and OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC) and which
partitions a member owns (the groups CLI). Layouts (non-flexible, any version read with the
current format, as Kafka does):

- ConsumerProtocolSubscription: version int16, topics [string], user data (nullable bytes), ...
- ConsumerProtocolAssignment: version int16, assigned partitions [topic string, partitions [int32]], ...

Pure; callers: the coordinator and the groups CLI. Malformed input yields None, never an exception.
"""

from __future__ import annotations

from odradek.protocol.primitives import ProtocolDecodeError, Reader

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes | memoryview) -> frozenset[str] | None:
    """The topics a member subscribes to, or None when the metadata is not a subscription."""
    r = Reader(metadata)
    try:
        r.int16()
        count = r.array_length()
        if count < 0:
            return None
        return frozenset(r.string() for _ in range(count))
    except ProtocolDecodeError:
        return None


def assignment_partitions(assignment: bytes | memoryview) -> dict[str, tuple[int, ...]] | None:
    """Topic -> partitions a member is assigned, or None when the bytes are not an assignment."""
    if len(assignment) == 0:
        return {}
    r = Reader(assignment)
    try:
        r.int16()
        topics: dict[str, tuple[int, ...]] = {}
        for _ in range(max(r.array_length(), 0)):
            topic = r.string()
            topics[topic] = tuple(r.int32() for _ in range(max(r.array_length(), 0)))
        return topics
    except ProtocolDecodeError:
        return None
