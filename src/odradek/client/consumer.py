"""Reading one offset range of one partition, as columns: the consumer side of the blocking client.

Owns `read_range` (fetch [from_offset, until_offset) from the leader, chunk by chunk) and
`decode_range` (records of the complete batches of a fetch response that fall in a range, decoded
straight into `RecordColumns`, with the offset to fetch next).

Behaviour, following Kafka's consumer and Spark's Kafka source:
- a fetch from the middle of a batch returns the whole batch; records before `from_offset` and from
  `until_offset` on are dropped, so every offset of the range is yielded at most once, in order;
- control batches (transaction markers) are skipped but their offsets are consumed; offsets that
  no longer exist (compaction) are simply absent; under read_committed the batches of the aborted
  transactions a Fetch answer lists are skipped the same way (odradek.client.aborted);
- OFFSET_OUT_OF_RANGE below the log start offset means records were deleted: `on_data_loss` is told
  and, if it returns, reading resumes at the log start offset; above the high watermark means the
  log was truncated: `on_data_loss` is told and the range ends;
- UNKNOWN_TOPIC_OR_PARTITION means the topic was deleted: `on_data_loss` is told and the range ends;
- no progress for `poll_timeout_ms` (records below `until_offset` never become visible) is reported
  to `on_data_loss` too, and ends the range.
- every fetch of a range is read into the connection's one reused receive buffer: the records are
  decoded (copied out) before the next fetch, so no view of it outlives its response.

`on_data_loss` raises to fail the read, or returns to skip what is missing. Callers: odradek.spark
(executors), odradek.pipeline, tests.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator

from odradek.client.aborted import AbortedBatches
from odradek.client.client import KafkaClient
from odradek.client.types import TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.batch import CONTROL_MASK, iter_batches
from odradek.protocol.records.record import RecordColumns, decode_batch_into

DEFAULT_FETCH_MAX_BYTES = 8 << 20
DEFAULT_FETCH_MAX_WAIT_MS = 500
_EARLIEST, _LATEST = -2, -1


def decode_range(
    records: memoryview | bytes,
    from_offset: int,
    until_offset: int,
    aborted_transactions: tuple[tuple[int, int], ...] = (),
) -> tuple[RecordColumns, int]:
    """Records with from_offset <= offset < until_offset, and the offset after the last complete batch;
    with `aborted_transactions` (a read_committed answer's), their batches are left out.

    The returned next offset is `from_offset` when `records` holds no complete batch past it.
    """
    columns = RecordColumns()
    next_offset = from_offset
    aborted = AbortedBatches(aborted_transactions) if aborted_transactions else None
    for position, header in iter_batches(records):
        if header.next_offset <= from_offset:
            if aborted is not None:
                aborted.skips(records, position, header)  # markers before the range still count
            continue
        if header.base_offset >= until_offset:
            break
        next_offset = header.next_offset
        if aborted is not None:
            if not aborted.skips(records, position, header):
                decode_batch_into(records, position, header, columns)
        elif not header.attributes & CONTROL_MASK:
            decode_batch_into(records, position, header, columns)
    return _trim(columns, from_offset, until_offset), next_offset


def _trim(columns: RecordColumns, from_offset: int, until_offset: int) -> RecordColumns:
    offsets = columns.offsets
    if not offsets or (offsets[0] >= from_offset and offsets[-1] < until_offset):
        return columns
    lo, hi = bisect.bisect_left(offsets, from_offset), bisect.bisect_left(offsets, until_offset)
    return RecordColumns(
        offsets=offsets[lo:hi],
        timestamps=columns.timestamps[lo:hi],
        timestamp_types=columns.timestamp_types[lo:hi],
        keys=columns.keys[lo:hi],
        values=columns.values[lo:hi],
        headers=columns.headers[lo:hi],
    )


def read_range(
    client: KafkaClient,
    tp: TopicPartition,
    from_offset: int,
    until_offset: int,
    *,
    on_data_loss: Callable[[str], None],
    poll_timeout_ms: int = 120_000,
    max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
    max_wait_ms: int = DEFAULT_FETCH_MAX_WAIT_MS,
    min_bytes: int = 1,
) -> Iterator[RecordColumns]:
    """Yield the records of [from_offset, until_offset) of `tp`, one chunk per fetch response."""
    offset = from_offset
    stalled_since = time.monotonic()
    while offset < until_offset:
        result = client.fetch(
            tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms, min_bytes=min_bytes, reuse_buffer=True
        )
        if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            offset = _recover_out_of_range(client, tp, offset, until_offset, on_data_loss)
            continue
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            on_data_loss(f"{tp} does not exist any more; offsets [{offset}, {until_offset}) are lost")
            return
        if result.error_code:
            raise KafkaError(result.error_code, f"fetching {tp} at offset {offset}")
        columns, next_offset = decode_range(result.records, offset, until_offset, result.aborted_transactions)
        if next_offset > offset:
            offset, stalled_since = next_offset, time.monotonic()
            if columns.offsets:
                yield columns
        elif (time.monotonic() - stalled_since) * 1000 > poll_timeout_ms:
            on_data_loss(
                f"no record of {tp} at or after offset {offset} arrived within {poll_timeout_ms} ms"
                f" (high watermark {result.high_watermark}); offsets [{offset}, {until_offset}) are missing"
            )
            return


def _recover_out_of_range(
    client: KafkaClient,
    tp: TopicPartition,
    offset: int,
    until_offset: int,
    on_data_loss: Callable[[str], None],
) -> int:
    """The offset to go on from after OFFSET_OUT_OF_RANGE (until_offset to stop)."""
    log_start = client.list_offsets({tp: _EARLIEST})[tp]
    if offset < log_start:
        end = min(log_start, until_offset)
        on_data_loss(f"offsets [{offset}, {end}) of {tp} were deleted (log start offset is {log_start})")
        return end
    high_watermark = client.list_offsets({tp: _LATEST})[tp]
    if offset <= high_watermark:
        return offset
    on_data_loss(
        f"offset {offset} of {tp} is beyond its high watermark {high_watermark}; offsets [{offset},"
        f" {until_offset}) are lost"
    )
    return until_offset
