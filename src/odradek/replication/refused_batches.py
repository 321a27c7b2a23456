"""The idempotent batches a partition leader refused unwritten, so that the gap they leave is not
answered as the producer's fault.

Owns, per producer id, the producer epoch, first sequence and error of the last batch this leader
refused with a retriable error before writing anything (NOT_ENOUGH_REPLICAS while the ISR is short,
KAFKA_STORAGE_ERROR on a failed write).

Why (a deliberate deviation from Kafka, written down in docs/deviations.md too): a producer with several
requests in flight sends batch N+1 before it learns that N was refused. If the cause is gone when
N+1 arrives (the ISR grew back, space returned), Kafka answers N+1 OUT_OF_ORDER_SEQUENCE_NUMBER.
librdkafka (confluent-kafka, up to 2.16 at least: confluentinc/librdkafka#4953) answers that by
bumping its producer epoch and sending every unacknowledged batch again under the new epoch, where
no broker can recognise a retry: a batch that was written but whose answer was lost is written a
second time. The fault runs found exactly this (seed 53 in docs/reliability.md). A leader that
knows it refused N itself answers N+1 with N's retriable error instead; every client retries it
after N, in order, under the same epoch, and the duplicate check keeps its meaning.

Rules: the memory of a producer ends when one of its batches is appended (an append in sequence
means N was written) and when the partition starts a new leader epoch or follows (it clears the
memory). A batch of another producer epoch is not explained by it, and a gap at a sequence this
leader did not refuse is still OUT_OF_ORDER_SEQUENCE_NUMBER, as in Kafka. ISR changes within the
leader epoch keep it: the ISR growing back is exactly when N+1 arrives.

Callers: `Partition.append_records_to_leader`, on the event loop.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.batch import HEADER, BatchHeader

NO_PRODUCER_ID = -1


class RefusedBatch(NamedTuple):
    producer_epoch: int
    first_sequence: int
    error_code: ErrorCode
    message: str


def _idempotent_header(records: memoryview) -> BatchHeader | None:
    """The first batch's header when it carries a producer id."""
    if len(records) < HEADER.size:
        return None
    header = BatchHeader.unpack_from(records)
    return header if header.producer_id > NO_PRODUCER_ID else None


class RefusedBatches:
    """See the module docstring."""

    __slots__ = ("_by_producer",)

    def __init__(self) -> None:
        self._by_producer: dict[int, RefusedBatch] = {}

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    def remember(self, records: memoryview, error: KafkaError) -> None:
        """`records` were refused with `error`, nothing written."""
        header = _idempotent_header(records)
        if header is not None:
            self._by_producer[header.producer_id] = RefusedBatch(
                header.producer_epoch, header.base_sequence, ErrorCode(error.code), error.message
            )

    def gap_error(self, records: memoryview) -> KafkaError | None:
        """The refusal that explains an out-of-order sequence in `records`, if this leader made it."""
        header = _idempotent_header(records)
        refused = None if header is None else self._by_producer.get(header.producer_id)
        if refused is None or refused.producer_epoch != header.producer_epoch:
            return None
        return KafkaError(
            refused.error_code,
            f"sequence {header.base_sequence} of producer {header.producer_id} follows sequence "
            f"{refused.first_sequence}, refused unwritten: {refused.message}",
        )

    def appended(self, records: memoryview) -> None:
        """A batch of `records`' producer was written: its gap, if any, is closed."""
        header = _idempotent_header(records)
        if header is not None:
            self._by_producer.pop(header.producer_id, None)

    def clear(self) -> None:
        self._by_producer.clear()
