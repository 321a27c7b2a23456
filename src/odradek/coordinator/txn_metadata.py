"""A transactional id's state, as Kafka's TransactionMetadata keeps it, and its pure transitions.

States (Kafka's TransactionState, with their `__transaction_state` status codes): Empty (0, no
transaction), Ongoing (1, partitions added), PrepareCommit (2) and PrepareAbort (3) (the decision is
in the log; markers are being written), CompleteCommit (4) and CompleteAbort (5) (markers written),
Dead (6, the id expired: only its tombstone is written) and PrepareEpochFence (7, never written by
odradek: a fence goes straight to PrepareAbort at the bumped epoch, the state Kafka then writes).

Legal moves (Kafka's): Empty/CompleteCommit/CompleteAbort -> Empty (InitProducerId) or Ongoing
(AddPartitionsToTxn); Ongoing -> Ongoing, PrepareCommit, PrepareAbort; PrepareCommit ->
CompleteCommit; PrepareAbort -> CompleteAbort.

Callers: the transaction coordinator and tests. Pure: values in, values out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from odradek.coordinator.txn_records import TxnLogValue
from odradek.protocol.topic_partition import TopicPartition

MAX_PRODUCER_EPOCH = 32766  # Short.MaxValue - 1: the last epoch before a new producer id is needed
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name of the state (ListTransactions, DescribeTransactions): "PrepareCommit"..."""
        return self.name.title().replace("_", "")


COMPLETED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARED = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    # Kept in memory only, as in Kafka 3.9 (a replayed id has neither): the producer id before the
    # last transition and the epoch a retried InitProducerId may still name (KIP-360).
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def to_value(self) -> TxnLogValue:
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            int(self.state),
            tuple(sorted(self.partitions)),
            self.last_update_ms,
            self.start_ms,
        )

    @property
    def commit(self) -> bool:
        """Whether a prepared transaction commits (PrepareCommit) rather than aborts."""
        return self.state is TxnState.PREPARE_COMMIT


def from_value(transactional_id: str, value: TxnLogValue) -> TxnMetadata:
    return TxnMetadata(
        transactional_id,
        value.producer_id,
        value.producer_epoch,
        value.timeout_ms,
        TxnState(value.status),
        frozenset(value.partitions),
        value.start_ms,
        value.last_update_ms,
    )


def needs_new_producer_id(current: TxnMetadata | None, expected_epoch: int | None) -> bool:
    """Whether InitProducerId gives the id a new producer id: there is none yet, or the epoch is
    exhausted and the request (if it names an epoch) names the current one."""
    return current is None or (
        current.producer_epoch >= MAX_PRODUCER_EPOCH
        and (expected_epoch is None or expected_epoch == current.producer_epoch)
    )


def initialized(
    current: TxnMetadata | None,
    transactional_id: str,
    new_producer_id: int,
    timeout_ms: int,
    now_ms: int,
    expected_epoch: int | None = None,
) -> TxnMetadata | None:
    """Empty after InitProducerId (Kafka's prepareIncrementProducerEpoch and
    prepareProducerIdRotation), or None when the producer is fenced:
    - a new producer id at epoch 0 when `needs_new_producer_id`;
    - no expected epoch: the next epoch;
    - the expected epoch is the current one: the next epoch, the current one remembered as the last;
    - the expected epoch is the last one remembered: a retry of a bump already done, answered with
      the current producer id and epoch unchanged;
    - any other expected epoch: fenced."""
    if current is None:
        producer_id, epoch, last_id, last_epoch = new_producer_id, 0, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    else:
        last_id = current.producer_id
        if needs_new_producer_id(current, expected_epoch):
            producer_id, epoch = new_producer_id, 0
            last_epoch = current.producer_epoch if expected_epoch is not None else NO_PRODUCER_EPOCH
        elif expected_epoch is None:
            producer_id, epoch = current.producer_id, current.producer_epoch + 1
            last_epoch = NO_PRODUCER_EPOCH
        elif expected_epoch in (current.producer_epoch, current.last_producer_epoch):
            # the current epoch is bumped; the last one is a retry of that bump, answered unchanged
            bump = 1 if expected_epoch == current.producer_epoch else 0
            producer_id, epoch = current.producer_id, current.producer_epoch + bump
            last_epoch = expected_epoch
        else:
            return None
    return TxnMetadata(
        transactional_id,
        producer_id,
        epoch,
        timeout_ms,
        TxnState.EMPTY,
        last_update_ms=now_ms,
        last_producer_id=last_id,
        last_producer_epoch=last_epoch,
    )


def with_partitions(current: TxnMetadata, partitions: frozenset[TopicPartition], now_ms: int) -> TxnMetadata:
    """Ongoing with `partitions` added; the transaction starts now unless it already runs."""
    start_ms = current.start_ms if current.state is TxnState.ONGOING else now_ms
    return replace(
        current,
        state=TxnState.ONGOING,
        partitions=current.partitions | partitions,
        start_ms=start_ms,
        last_update_ms=now_ms,
        last_producer_id=current.producer_id,
    )


def prepared(current: TxnMetadata, commit: bool, now_ms: int, fence: bool = False) -> TxnMetadata:
    """PrepareCommit or PrepareAbort; `fence` bumps the epoch first (Kafka's PrepareEpochFence)."""
    epoch = current.producer_epoch + 1 if fence else current.producer_epoch
    state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    last_epoch = NO_PRODUCER_EPOCH if fence else current.last_producer_epoch
    return replace(
        current,
        producer_epoch=epoch,
        state=state,
        last_update_ms=now_ms,
        last_producer_id=current.producer_id,
        last_producer_epoch=last_epoch,
    )


def completed(current: TxnMetadata, now_ms: int) -> TxnMetadata:
    """CompleteCommit or CompleteAbort after the markers of a prepared transaction are written."""
    state = TxnState.COMPLETE_COMMIT if current.commit else TxnState.COMPLETE_ABORT
    return replace(
        current,
        state=state,
        partitions=frozenset(),
        last_update_ms=now_ms,
        last_producer_id=current.producer_id,
    )
