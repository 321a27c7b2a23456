"""Differential cases of topics and their metadata: CreateTopics, Metadata, DeleteTopics,
CreatePartitions, valid and edge (bad names, bad configs, bad counts, unknown topics)."""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import create_partitions as cp
from odradek.protocol.messages import delete_topics as dt
from tests.differential.build import create, fmt, metadata, ready, topic
from tests.differential.engine import Case, Ctx, Step

NO_IDS = frozenset({"topic_id"})


def delete(*names: str, version: int = 6, compare: bool = True) -> Step:
    def request(c: Ctx) -> dt.DeleteTopicsRequest:
        if version >= 6:
            states = [dt.DeleteTopicsRequest.DeleteTopicState(name=fmt(n, c)) for n in names]
            return dt.DeleteTopicsRequest(topics=states, timeout_ms=30000)
        return dt.DeleteTopicsRequest(topic_names=[fmt(n, c) for n in names], timeout_ms=30000)

    return Step(ApiKey.DELETE_TOPICS, version, request, compare=compare)


def partitions(count: int, name: str = "{topic}", version: int = 3, validate_only: bool = False) -> Step:
    return Step(
        ApiKey.CREATE_PARTITIONS,
        version,
        lambda c: cp.CreatePartitionsRequest(
            topics=[cp.CreatePartitionsRequest.CreatePartitionsTopic(name=fmt(name, c), count=count)],
            timeout_ms=30000,
            validate_only=validate_only,
        ),
    )


CASES: list[Case] = []

# CreateTopics at every version Kafka 3.9 serves, valid
for v in range(2, 8):
    CASES.append(Case(f"create-topics/v{v}/one-partition", (create(("{topic}", 1, 1), version=v),)))
CASES += [
    Case(
        "create-topics/config-listing",
        (create(("{topic}", 1, 1)),),
        strict=True,
        deviation="unlisted-topic-configs",
    ),
    Case(
        "create-topics/three-partitions",
        (create(("{topic}", 3, 1)), ready(partitions=3), metadata("{topic}")),
    ),
    Case("create-topics/two-topics", (create(("{topic}", 1, 1), ("{topic2}", 2, 1)),)),
    Case("create-topics/default-partitions", (create(("{topic}", -1, -1)),)),
    Case("create-topics/with-configs", (create(("{topic}", 1, 1, {"cleanup.policy": "compact"})),)),
    Case("create-topics/validate-only", (create(("{topic}", 2, 1), validate_only=True), metadata("{topic}"))),
    Case("create-topics/already-exists", (topic(), create(("{topic}", 1, 1)))),
    Case("create-topics/duplicate-in-request", (create(("{topic}", 1, 1), ("{topic}", 1, 1)),)),
    Case("create-topics/zero-partitions", (create(("{topic}", 0, 1)),)),
    Case("create-topics/negative-partitions", (create(("{topic}", -5, 1)),)),
    Case("create-topics/replication-factor-too-big", (create(("{topic}", 1, 3)),)),
    Case("create-topics/replication-factor-zero", (create(("{topic}", 1, 0)),)),
    Case("create-topics/invalid-name-chars", (create(("bad/name-{topic}", 1, 1)),)),
    Case("create-topics/name-dot", (create((".", 1, 1)),)),
    Case("create-topics/name-dotdot", (create(("..", 1, 1)),)),
    Case("create-topics/name-empty", (create(("", 1, 1)),)),
    Case("create-topics/name-too-long", (create(("x" * 250, 1, 1)),)),
    Case("create-topics/unknown-config", (create(("{topic}", 1, 1, {"no.such.config": "1"})),)),
    Case("create-topics/bad-config-value", (create(("{topic}", 1, 1, {"retention.ms": "soon"})),)),
    Case("create-topics/bad-cleanup-policy", (create(("{topic}", 1, 1, {"cleanup.policy": "shred"})),)),
    Case("create-topics/min-isr-above-rf", (create(("{topic}", 1, 1, {"min.insync.replicas": "0"})),)),
    Case("create-topics/bad-compression", (create(("{topic}", 1, 1, {"compression.type": "brotli"})),)),
    Case("create-topics/internal-name", (create(("__consumer_offsets", 1, 1)),)),
    Case(
        "create-topics/validate-only-bad-config",
        (create(("{topic}", 1, 1, {"segment.bytes": "1"}), validate_only=True),),
    ),
]

# Metadata
for v in (1, 4, 8, 9, 12):
    CASES.append(Case(f"metadata/v{v}/one-topic", (topic(), ready(), metadata("{topic}", version=v))))
CASES += [
    Case("metadata/unknown-topic", (metadata("no-{topic}"),)),
    Case("metadata/unknown-topic-v4", (metadata("no-{topic}", version=4),)),
    Case(
        "metadata/auto-create",
        (metadata("{topic}", auto=True), ready(), metadata("{topic}")),
        deviation="auto-create-synchronous",
    ),
    Case("metadata/auto-create-invalid-name", (metadata("bad/{topic}", auto=True),)),
    Case("metadata/no-topics", (metadata(),)),
    Case("metadata/three-partitions", (topic(3), ready(partitions=3), metadata("{topic}"))),
    Case("metadata/two-topics-one-unknown", (topic(), ready(), metadata("{topic}", "no-{topic}"))),
    Case(
        "metadata/authorized-operations", (topic(), ready(), metadata("{topic}", version=10, operations=True))
    ),
    Case("metadata/internal-topic", (metadata("__consumer_offsets", version=9),)),
]

# DeleteTopics
for v in (1, 3, 4, 5, 6):
    CASES.append(Case(f"delete-topics/v{v}/existing", (topic(), ready(), delete("{topic}", version=v))))
CASES += [
    Case("delete-topics/unknown", (delete("no-{topic}"),)),
    Case("delete-topics/unknown-v3", (delete("no-{topic}", version=3),)),
    Case("delete-topics/one-known-one-unknown", (topic(), ready(), delete("{topic}", "no-{topic}"))),
    Case("delete-topics/internal", (delete("__consumer_offsets"),)),
    Case("delete-topics/twice", (topic(), ready(), delete("{topic}", compare=False), delete("{topic}"))),
]

# CreatePartitions
for v in (0, 1, 2, 3):
    CASES.append(Case(f"create-partitions/v{v}/grow", (topic(), ready(), partitions(3, version=v))))
CASES += [
    Case(
        "create-partitions/grow-then-metadata",
        (topic(), ready(), partitions(2), ready(partitions=2), metadata("{topic}")),
    ),
    Case("create-partitions/same-count", (topic(2), ready(partitions=2), partitions(2))),
    Case("create-partitions/shrink", (topic(3), ready(partitions=3), partitions(1))),
    Case("create-partitions/unknown-topic", (partitions(3, name="no-{topic}"),)),
    Case(
        "create-partitions/validate-only",
        (topic(), ready(), partitions(4, validate_only=True), metadata("{topic}")),
    ),
    Case("create-partitions/internal-topic", (partitions(60, name="__consumer_offsets"),)),
]
