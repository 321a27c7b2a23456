"""Leaving aborted transactions out of a read_committed fetch: the consumer side of transactions.

Owns `AbortedBatches`, the rule Kafka's consumer applies to the batches of one read_committed Fetch
answer, given that answer's `aborted_transactions` (producer id and first offset of each aborted
transaction overlapping the records read):
- before a batch of a producer is looked at, every aborted transaction whose first offset is at or
  below that batch's last offset becomes active for its producer;
- a transactional data batch of a producer with an active aborted transaction is skipped;
- that producer's ABORT marker (a control batch) ends it;
- control batches are never records, committed or not (the caller skips them anyway).
The state lives for one Fetch answer: the broker lists, in each answer, every aborted transaction
that overlaps what it returned, including those begun before the fetch offset.

Callers: odradek.client.consumer (`decode_range`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.control import ControlRecordType, read_end_txn_marker

ABORT = ControlRecordType.ABORT


class AbortedBatches:
    """Which batches of one Fetch answer belong to aborted transactions."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        """`aborted`: (producer id, first offset) of each aborted transaction the answer lists."""
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._active: set[int] = set()

    def skips(self, buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> bool:
        """Whether the batch at `position` of `buf` is left out (aborted data, or a marker)."""
        if header.producer_id < 0:
            return header.is_control
        pending = self._pending
        while pending and pending[0][0] <= header.last_offset:
            self._active.add(heapq.heappop(pending)[1])
        if header.is_control:  # a marker emptied by the cleaner (no record) ends nothing still here
            if header.records_count and read_end_txn_marker(buf, position, header).control_type == ABORT:
                self._active.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._active
