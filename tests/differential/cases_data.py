"""Differential cases of the data path: Produce, Fetch, ListOffsets, DeleteRecords,
OffsetForLeaderEpoch, DescribeLogDirs, DescribeProducers; valid and edge (unknown topics and
partitions, out-of-range offsets, oversized batches, bad CRCs, idempotent sequence gaps, fenced
producer epochs, acks values, timestamps out of bounds)."""

from __future__ import annotations

from collections.abc import Callable

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import delete_records as dr
from odradek.protocol.messages import describe_log_dirs as dl
from odradek.protocol.messages import describe_producers as dp
from odradek.protocol.messages import offset_for_leader_epoch as oe
from odradek.protocol.records.compression import CompressionType
from tests.differential.build import fetch, fmt, init_producer, list_offsets, produce, ready, records, topic
from tests.differential.engine import Case, Step

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def corrupt(batch: bytes) -> bytes:
    """The batch with one bit of its CRC flipped (the CRC is bytes 17..20)."""
    out = bytearray(batch)
    out[17] ^= 0x01
    return bytes(out)


def delete_records(offset: int, *, name: str = "{topic}", partition: int = 0, version: int = 2) -> Step:
    return Step(
        ApiKey.DELETE_RECORDS,
        version,
        lambda c: dr.DeleteRecordsRequest(
            topics=[
                dr.DeleteRecordsRequest.DeleteRecordsTopic(
                    name=fmt(name, c),
                    partitions=[dr.DeleteRecordsRequest.DeleteRecordsPartition(partition, offset)],
                )
            ],
            timeout_ms=10000,
        ),
    )


def leader_epoch(
    epoch: int, *, name: str = "{topic}", partition: int = 0, version: int = 4, current: int = -1
) -> Step:
    return Step(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        version,
        lambda c: oe.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                oe.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                    topic=fmt(name, c),
                    partitions=[
                        oe.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=current, leader_epoch=epoch
                        )
                    ],
                )
            ],
        ),
    )


def log_dirs(*, name: str = "{topic}", partitions: tuple[int, ...] = (0,), version: int = 4) -> Step:
    return Step(
        ApiKey.DESCRIBE_LOG_DIRS,
        version,
        lambda c: dl.DescribeLogDirsRequest(
            topics=[
                dl.DescribeLogDirsRequest.DescribableLogDirTopic(
                    topic=fmt(name, c), partitions=list(partitions)
                )
            ]
        ),
    )


def producers(*, name: str = "{topic}", partitions: tuple[int, ...] = (0,)) -> Step:
    return Step(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        lambda c: dp.DescribeProducersRequest(
            topics=[
                dp.DescribeProducersRequest.TopicRequest(
                    name=fmt(name, c), partition_indexes=list(partitions)
                )
            ]
        ),
    )


def with_topic(*steps: Step, partitions: int = 1, configs: dict[str, str] | None = None) -> tuple[Step, ...]:
    return (topic(partitions, configs=configs), ready(partitions=partitions), *steps)


def idempotent(count: int = 1, seq: int = 0, epoch: int | str = "init") -> Callable[..., bytes]:
    return records(count, pid="init", epoch=epoch, seq=seq)


CASES: list[Case] = []

# Produce at each version Kafka 3.9 serves for magic v2, acks all
for v in range(3, 12):
    CASES.append(Case(f"produce/v{v}/one-record", with_topic(produce(version=v))))
for acks in (1, -1):
    CASES.append(Case(f"produce/acks-{acks}", with_topic(produce(acks=acks), produce(records(3), acks=acks))))
CASES += [
    Case("produce/acks-2-invalid", with_topic(produce(acks=2))),
    Case("produce/ten-records", with_topic(produce(records(10)), produce(records(5)))),
    Case("produce/unknown-topic", (produce(name="no-{topic}"),)),
    Case("produce/unknown-partition", with_topic(produce(partition=7))),
    Case("produce/negative-partition", with_topic(produce(partition=-1))),
    Case("produce/bad-crc", with_topic(produce(lambda c: corrupt(records(2)(c))))),
    Case("produce/bad-crc-v3", with_topic(produce(lambda c: corrupt(records(2)(c)), version=3))),
    Case(
        "produce/oversized-batch",
        with_topic(produce(records(1, size=4000)), configs={"max.message.bytes": "2000"}),
    ),
    Case(
        "produce/under-limit-batch",
        with_topic(produce(records(1, size=1000)), configs={"max.message.bytes": "2000"}),
    ),
    Case("produce/internal-topic", (produce(name="__consumer_offsets"),)),
    Case("produce/invalid-name", (produce(name="bad/{topic}"),)),
    Case("produce/second-partition", with_topic(produce(partition=1), produce(partition=1), partitions=2)),
    Case("produce/null-key", with_topic(produce(records(2, key=None)))),
    Case(
        "produce/timestamp-too-old",
        with_topic(
            produce(records(1, timestamp=1_000)), configs={"message.timestamp.before.max.ms": "3600000"}
        ),
    ),
    Case(
        "produce/log-append-time",
        with_topic(
            produce(),
            fetch(ignore=frozenset({"base_timestamp", "max_timestamp", "timestamp"})),  # each broker's clock
            configs={"message.timestamp.type": "LogAppendTime"},
        ),
    ),
    Case(
        "produce/compact-without-key",
        with_topic(produce(records(1, key=None)), configs={"cleanup.policy": "compact"}),
    ),
    Case("produce/compact-with-key", with_topic(produce(records(1)), configs={"cleanup.policy": "compact"})),
    Case("produce/truncated-batch", with_topic(produce(lambda c: records(3)(c)[:-5]))),
    Case("produce/empty-records", with_topic(produce(b""))),
]

# Compressed batches, as produced and as a topic's compression.type rewrites them
for codec in ("GZIP", "SNAPPY", "LZ4", "ZSTD"):
    CASES.append(
        Case(
            f"compression/{codec.lower()}-round-trip",
            with_topic(produce(records(3, compression=CompressionType[codec]), version=9), fetch()),
        )
    )
CASES += [
    Case(
        "compression/topic-gzip-recompresses",
        with_topic(produce(records(3)), fetch(), configs={"compression.type": "gzip"}),
    ),
    Case(
        "compression/topic-uncompressed-decompresses",
        with_topic(
            produce(records(3, compression=CompressionType.LZ4)),
            fetch(),
            configs={"compression.type": "uncompressed"},
        ),
    ),
    Case(
        "compression/zstd-on-old-produce-version",
        with_topic(produce(records(2, compression=CompressionType.ZSTD), version=6)),
    ),
]

# Idempotent producer: sequences, gaps, duplicates, fenced epochs
CASES += [
    Case("idempotent/init", (init_producer(),)),
    Case("idempotent/first-batch", with_topic(init_producer(compare=False), produce(idempotent()))),
    Case(
        "idempotent/in-order",
        with_topic(
            init_producer(compare=False), produce(idempotent(2, 0)), produce(idempotent(3, 2)), fetch()
        ),
    ),
    Case(
        "idempotent/sequence-gap",
        with_topic(init_producer(compare=False), produce(idempotent(1, 0)), produce(idempotent(1, 5))),
    ),
    Case(
        "idempotent/first-sequence-not-zero",
        with_topic(init_producer(compare=False), produce(idempotent(1, 3))),
    ),
    Case(
        "idempotent/duplicate",
        with_topic(
            init_producer(compare=False),
            produce(idempotent(2, 0)),
            produce(idempotent(2, 0)),
            list_offsets(LATEST),
        ),
    ),
    Case(
        "idempotent/old-duplicate",
        with_topic(
            init_producer(compare=False),
            produce(idempotent(1, 0)),
            produce(idempotent(1, 1)),
            produce(idempotent(1, 0)),
        ),
    ),
    Case("idempotent/unknown-producer-id", with_topic(produce(records(1, pid=987654, epoch=0, seq=0)))),
    Case(
        "idempotent/epoch-bump-restarts-sequence",
        with_topic(
            init_producer(compare=False), produce(idempotent(1, 0)), produce(idempotent(1, 0, epoch="init+1"))
        ),
    ),
    Case(
        "idempotent/epoch-bump-bad-sequence",
        with_topic(
            init_producer(compare=False), produce(idempotent(1, 0)), produce(idempotent(1, 4, epoch="init+1"))
        ),
    ),
    Case(
        "idempotent/describe-producers",
        with_topic(init_producer(compare=False), produce(idempotent(3, 0)), producers()),
    ),
    Case("idempotent/describe-producers-none", with_topic(produce(), producers())),
    Case("idempotent/describe-producers-unknown-topic", (producers(name="no-{topic}"),)),
    Case("idempotent/describe-producers-unknown-partition", with_topic(producers(partitions=(4,)))),
    Case("idempotent/init-v0", (init_producer(version=0),)),
    Case("idempotent/init-v2", (init_producer(version=2),)),
]

# Fetch
for v in (4, 7, 11, 12):
    CASES.append(Case(f"fetch/v{v}/records", with_topic(produce(records(3)), fetch(version=v))))
CASES += [
    Case("fetch/empty-partition", with_topic(fetch())),
    Case("fetch/middle-offset", with_topic(produce(records(2)), produce(records(2)), fetch(2))),
    Case("fetch/at-high-watermark", with_topic(produce(records(2)), fetch(2))),
    Case("fetch/offset-out-of-range-above", with_topic(produce(records(2)), fetch(50))),
    Case("fetch/offset-out-of-range-negative", with_topic(produce(records(2)), fetch(-5))),
    Case("fetch/unknown-topic", (fetch(name="no-{topic}"),)),
    Case("fetch/unknown-topic-v4", (fetch(name="no-{topic}", version=4),)),
    Case("fetch/unknown-partition", with_topic(fetch(partition=3))),
    Case("fetch/small-max-bytes", with_topic(produce(records(5, size=200)), fetch(max_bytes=100))),
    Case("fetch/fenced-leader-epoch", with_topic(produce(), fetch(current_leader_epoch=5))),
    Case("fetch/old-leader-epoch", with_topic(produce(), fetch(current_leader_epoch=-1))),
    Case("fetch/read-committed-plain", with_topic(produce(records(2)), fetch(isolation=1))),
    Case(
        "fetch/two-partitions",
        with_topic(produce(partition=1), fetch(partition=1), fetch(partition=0), partitions=2),
    ),
]

# ListOffsets
for v in (1, 2, 4, 5, 6, 7, 8):
    CASES.append(
        Case(f"list-offsets/v{v}/latest", with_topic(produce(records(3)), list_offsets(LATEST, version=v)))
    )
CASES += [
    Case("list-offsets/earliest", with_topic(produce(records(3)), list_offsets(EARLIEST))),
    Case("list-offsets/max-timestamp", with_topic(produce(records(3)), list_offsets(MAX_TIMESTAMP))),
    Case("list-offsets/by-timestamp", with_topic(produce(records(3)), list_offsets(1_700_000_000_000))),
    Case(
        "list-offsets/timestamp-after-all", with_topic(produce(records(3)), list_offsets(1_900_000_000_000))
    ),
    Case("list-offsets/empty-latest", with_topic(list_offsets(LATEST))),
    Case("list-offsets/empty-earliest", with_topic(list_offsets(EARLIEST))),
    Case("list-offsets/unknown-topic", (list_offsets(LATEST, name="no-{topic}"),)),
    Case("list-offsets/unknown-partition", with_topic(list_offsets(LATEST, partition=9))),
    Case("list-offsets/read-committed", with_topic(produce(records(2)), list_offsets(LATEST, isolation=1))),
    Case("list-offsets/v0", with_topic(produce(), list_offsets(LATEST, version=0))),
]

# DeleteRecords
for v in (0, 1, 2):
    CASES.append(
        Case(f"delete-records/v{v}/middle", with_topic(produce(records(4)), delete_records(2, version=v)))
    )
CASES += [
    Case(
        "delete-records/then-earliest",
        with_topic(produce(records(4)), delete_records(3), list_offsets(EARLIEST)),
    ),
    Case("delete-records/then-fetch-deleted", with_topic(produce(records(4)), delete_records(3), fetch(0))),
    Case("delete-records/to-high-watermark", with_topic(produce(records(4)), delete_records(-1))),
    Case("delete-records/beyond-high-watermark", with_topic(produce(records(4)), delete_records(10))),
    Case("delete-records/unknown-topic", (delete_records(1, name="no-{topic}"),)),
    Case("delete-records/unknown-partition", with_topic(delete_records(1, partition=5))),
    Case(
        "delete-records/compacted-topic",
        with_topic(produce(records(2)), delete_records(1), configs={"cleanup.policy": "compact"}),
    ),
]

# OffsetForLeaderEpoch
for v in (2, 3, 4):
    CASES.append(
        Case(f"leader-epoch/v{v}/current", with_topic(produce(records(3)), leader_epoch(0, version=v)))
    )
CASES += [
    Case("leader-epoch/future-epoch", with_topic(produce(records(3)), leader_epoch(7))),
    Case("leader-epoch/fenced-current", with_topic(produce(), leader_epoch(0, current=9))),
    Case("leader-epoch/unknown-topic", (leader_epoch(0, name="no-{topic}"),)),
    Case("leader-epoch/unknown-partition", with_topic(leader_epoch(0, partition=4))),
]

# DescribeLogDirs
CASES += [
    Case("log-dirs/one-partition", with_topic(produce(records(2)), log_dirs())),
    Case("log-dirs/unknown-topic", (log_dirs(name="no-{topic}"),)),
    Case("log-dirs/v1", with_topic(log_dirs(version=1))),
]
