"""A blocking producer: partition choice, per-partition batching, and acknowledged sends.

Owns:
- Kafka's default partitioning of keyed records: murmur2 of the key bytes (the Java client's
  variant: seed 0x9747b28c, signed 32-bit result), made positive with `& 0x7fffffff`, modulo the
  partition count; records without key or partition stick to one partition per topic (first
  chosen at random) until the next flush (the sticky partitioner), moving round-robin after each flush;
- `Producer`: `send` buffers records per partition; `flush` builds one RecordBatch v2 per partition
  (Produce v3+ takes exactly one batch per partition) of at most `batch_bytes`, sends them with
  acks -1 by default, repeats until nothing is buffered, and returns the last offset written per
  partition. Buffers are flushed automatically when they exceed `buffer_bytes`. With
  `max_request_bytes` (Kafka's max.request.size), the batches of one request add up to at most that
  many bytes (sizes estimated before compression, as Kafka's producer does) and `send` refuses a
  record that alone would be larger (MESSAGE_TOO_LARGE).

Invariants: records of one partition are sent in `send` order; a failed flush raises (records may
then be written or not: at-least-once, as Kafka's producer without idempotence).
Subclasses (odradek.client.transactions) override how a batch is built and sent.
Callers: odradek.spark (sink tasks), odradek.pipeline (data generator), tests, benchmarks.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence

from odradek.client.client import KafkaClient
from odradek.client.types import TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.batch import RECORD_BATCH_OVERHEAD
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.record import Header

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF
_RECORD_OVERHEAD = 24
_HEADER_OVERHEAD = 10


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of `data` as a signed 32-bit int (Utils.murmur2 in the Java client)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = data[whole:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _estimated_size(record: SimpleRecord) -> int:
    """About the bytes `record` takes in a batch, uncompressed."""
    header_bytes = sum(_HEADER_OVERHEAD + len(k) + len(v or b"") for k, v in record.headers)
    return _RECORD_OVERHEAD + len(record.value or b"") + len(record.key or b"") + header_bytes


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Producer:
    """Buffers records per partition and writes them with acknowledged Produce requests."""

    def __init__(
        self,
        client: KafkaClient,
        *,
        acks: int = -1,
        compression: CompressionType = CompressionType.NONE,
        batch_bytes: int = 512 << 10,
        buffer_bytes: int = 8 << 20,
        max_request_bytes: int | None = None,
    ) -> None:
        self._client = client
        self._acks = acks
        self._compression = compression
        self._batch_bytes = batch_bytes
        self._buffer_bytes = buffer_bytes
        self._max_request_bytes = max_request_bytes
        self._pending: dict[TopicPartition, list[SimpleRecord]] = defaultdict(list)
        self._pending_bytes = 0
        self._sticky: dict[str, int] = {}
        self.records_sent = 0

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> TopicPartition:
        """Buffer one record; return the partition it goes to."""
        if partition is None:
            partition = self._choose_partition(topic, key)
        tp = TopicPartition(topic, partition)
        timestamp = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        record = SimpleRecord(value, key, tuple(headers), timestamp)
        size = _estimated_size(record)
        if self._max_request_bytes is not None and RECORD_BATCH_OVERHEAD + size > self._max_request_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"a record for {tp} is about {RECORD_BATCH_OVERHEAD + size} bytes in its batch, more than"
                f" max.request.size ({self._max_request_bytes} bytes)",
            )
        self._pending[tp].append(record)
        self._pending_bytes += size
        if self._pending_bytes >= self._buffer_bytes:
            self.flush()
        return tp

    def _choose_partition(self, topic: str, key: bytes | None) -> int:
        count = self._client.partition_count(topic)
        if count == 0:
            self._client.metadata([topic], allow_auto_topic_creation=True)
            count = self._wait_for_partitions(topic)
        if key is not None:
            return partition_for_key(key, count)
        return self._sticky.setdefault(topic, random.randrange(count)) % count

    def _wait_for_partitions(self, topic: str) -> int:
        deadline = time.monotonic() + self._client.timeout_s
        while (count := len(self._client.metadata([topic]).partitions_of(topic))) == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} has no partitions (and was not auto-created)")
            time.sleep(0.1)
        return count

    def flush(self) -> dict[TopicPartition, int]:
        """Write everything buffered; return the last offset written per partition."""
        last: dict[TopicPartition, int] = {}
        while self._pending:
            batches, counts = self._take_batches()
            for tp, base_offset in self._produce(batches).items():
                last[tp] = base_offset + counts[tp] - 1
                self.records_sent += counts[tp]
        self._pending_bytes = 0
        for topic in self._sticky:
            self._sticky[topic] += 1
        return last

    def _take_batches(self) -> tuple[dict[TopicPartition, bytes], dict[TopicPartition, int]]:
        """One request's batches: up to `batch_bytes` per partition, up to `max_request_bytes` in all
        (a partition that does not fit waits for the next request; the first always fits)."""
        batches: dict[TopicPartition, bytes] = {}
        counts: dict[TopicPartition, int] = {}
        room = self._max_request_bytes or 1 << 62
        for tp in list(self._pending):
            records = self._pending[tp]
            take, size = 0, 0
            while take < len(records):
                grown = size + _estimated_size(records[take])
                if (take or batches) and (size >= self._batch_bytes or RECORD_BATCH_OVERHEAD + grown > room):
                    break
                size, take = grown, take + 1
            if take == 0:
                continue
            room -= RECORD_BATCH_OVERHEAD + size
            batches[tp] = self._build_batch(tp, records[:take])
            counts[tp] = take
            if take == len(records):
                del self._pending[tp]
            else:
                self._pending[tp] = records[take:]
        return batches, counts

    def _build_batch(self, tp: TopicPartition, records: list[SimpleRecord]) -> bytes:
        """One batch of `records` for `tp` (subclasses add producer ids and sequences)."""
        return build_batch(records, self._compression)

    def _produce(self, batches: dict[TopicPartition, bytes]) -> dict[TopicPartition, int]:
        """Send one request's batches; return their base offsets."""
        return self._client.produce(batches, acks=self._acks)
