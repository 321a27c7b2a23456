"""Differential cases of transactions: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions, ListTransactions, and the
transactional produce and read_committed fetch; valid and edge (fenced epochs, unknown ids,
transactional state errors: EndTxn with nothing begun, adding after a commit began, wrong producer
ids)."""

from __future__ import annotations

import dataclasses

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import add_offsets_to_txn as ao
from odradek.protocol.messages import add_partitions_to_txn as ap
from odradek.protocol.messages import describe_transactions as dtx
from odradek.protocol.messages import end_txn as et
from odradek.protocol.messages import list_transactions as ltx
from odradek.protocol.messages import txn_offset_commit as toc
from tests.differential.build import (
    coordinator,
    fetch,
    fmt,
    init_producer,
    list_offsets,
    produce,
    producer_field,
    ready,
    records,
    topic,
)
from tests.differential.engine import Case, Ctx, Step

ONGOING_STATES = ("Ongoing",)


def add_partitions(
    *,
    name: str = "{topic}",
    partitions: tuple[int, ...] = (0,),
    version: int = 3,
    pid: int | str = "init",
    epoch: int | str = "init",
) -> Step:
    def request(c: Ctx) -> ap.AddPartitionsToTxnRequest:
        topics = [
            ap.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=fmt(name, c), partitions=list(partitions)
            )
        ]
        producer_id = producer_field(pid, c, "producer_id")
        producer_epoch = producer_field(epoch, c, "producer_epoch")
        if version >= 4:
            txn = ap.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=c.txn, producer_id=producer_id, producer_epoch=producer_epoch, topics=topics
            )
            return ap.AddPartitionsToTxnRequest(transactions=[txn])
        return ap.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=c.txn,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=topics,
        )

    return Step(ApiKey.ADD_PARTITIONS_TO_TXN, version, request, retry_on=frozenset({51}))


def add_offsets(*, version: int = 3, pid: int | str = "init", epoch: int | str = "init") -> Step:
    return Step(
        ApiKey.ADD_OFFSETS_TO_TXN,
        version,
        lambda c: ao.AddOffsetsToTxnRequest(
            transactional_id=c.txn,
            producer_id=producer_field(pid, c, "producer_id"),
            producer_epoch=producer_field(epoch, c, "producer_epoch"),
            group_id=c.group,
        ),
        retry_on=frozenset({51}),
    )


def end(
    committed: bool = True,
    *,
    version: int = 3,
    pid: int | str = "init",
    epoch: int | str = "init",
    retry: bool = True,
) -> Step:
    return Step(
        ApiKey.END_TXN,
        version,
        lambda c: et.EndTxnRequest(
            transactional_id=c.txn,
            producer_id=producer_field(pid, c, "producer_id"),
            producer_epoch=producer_field(epoch, c, "producer_epoch"),
            committed=committed,
        ),
        retry_on=frozenset({51}) if retry else frozenset(),
    )


def txn_commit(
    *, version: int = 3, offset: int = 7, name: str = "{topic}", epoch: int | str = "init"
) -> Step:
    def request(c: Ctx) -> toc.TxnOffsetCommitRequest:
        part = toc.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset
        )
        return toc.TxnOffsetCommitRequest(
            transactional_id=c.txn,
            group_id=c.group,
            producer_id=producer_field("init", c, "producer_id"),
            producer_epoch=producer_field(epoch, c, "producer_epoch"),
            topics=[
                toc.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=fmt(name, c), partitions=[part])
            ],
        )

    return Step(ApiKey.TXN_OFFSET_COMMIT, version, request, retry_on=frozenset({51}))


def describe_txn(*ids: str) -> Step:
    return Step(
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        lambda c: dtx.DescribeTransactionsRequest(transactional_ids=[fmt(i, c) for i in ids or ("{txn}",)]),
        until=lambda answer: all(
            s.transaction_state not in ("PrepareCommit", "PrepareAbort") for s in answer.transaction_states
        ),
    )


def list_txn(states: tuple[str, ...] = ("PrepareEpochFence",), version: int = 0) -> Step:
    """ListTransactions filtered to a state no case leaves a transaction in, or to a producer id none has."""
    return Step(
        ApiKey.LIST_TRANSACTIONS,
        version,
        ltx.ListTransactionsRequest(state_filters=list(states), producer_id_filters=[]),
    )


def settled(offset: int) -> Step:
    """Setup: ListOffsets read_committed until the last stable offset reaches `offset` (the
    transaction markers are written after EndTxn is answered)."""
    return Step(
        ApiKey.LIST_OFFSETS,
        7,
        list_offsets(-1, isolation=1).request,
        compare=False,
        until=lambda answer: answer.topics[0].partitions[0].offset >= offset,
    )


def txn_batch(count: int = 1, seq: int = 0, epoch: int | str = "init") -> object:
    return records(count, pid="init", epoch=epoch, seq=seq, txn=True)


def begun(partitions: int = 1) -> tuple[Step, ...]:
    """Setup: the case's topic, a transactional producer ("init") and its partition 0 added."""
    return (
        topic(partitions),
        ready(partitions=partitions),
        init_producer("{txn}", compare=False),
        dataclasses.replace(add_partitions(), compare=False),
    )


def tproduce(count: int = 1, seq: int = 0, epoch: int | str = "init", compare: bool = True) -> Step:
    return produce(txn_batch(count, seq, epoch), transactional_id="{txn}", compare=compare)  # type: ignore[arg-type]


CASES: list[Case] = []

# InitProducerId with a transactional id
for v in (0, 1, 2, 3, 4):
    CASES.append(Case(f"init-producer-id/v{v}/transactional", (init_producer("{txn}", version=v),)))
CASES += [
    Case(
        "init-producer-id/twice-bumps-epoch",
        (init_producer("{txn}", compare=False), init_producer("{txn}", step_name="again")),
    ),
    Case("init-producer-id/timeout-too-large", (init_producer("{txn}", timeout_ms=100_000_000),)),
    Case("init-producer-id/timeout-zero", (init_producer("{txn}", timeout_ms=0),)),
    Case("init-producer-id/empty-transactional-id", (init_producer("", timeout_ms=60000),)),
    Case(
        "init-producer-id/wrong-epoch-given",
        (
            init_producer("{txn}", compare=False),
            init_producer("{txn}", producer_id="init", producer_epoch="init+5", step_name="x"),
        ),
    ),
    Case(
        "init-producer-id/current-epoch-given",
        (
            init_producer("{txn}", compare=False),
            init_producer("{txn}", producer_id="init", producer_epoch="init", step_name="x"),
        ),
    ),
    Case("init-producer-id/during-ongoing", (*begun(), init_producer("{txn}", step_name="again"))),
]

# AddPartitionsToTxn
for v in (0, 1, 2, 3):
    CASES.append(
        Case(
            f"add-partitions/v{v}/one",
            (topic(), ready(), init_producer("{txn}", compare=False), add_partitions(version=v)),
        )
    )
CASES += [
    Case(
        "add-partitions/unknown-topic",
        (init_producer("{txn}", compare=False), add_partitions(name="no-{topic}")),
    ),
    Case(
        "add-partitions/unknown-partition",
        (topic(), ready(), init_producer("{txn}", compare=False), add_partitions(partitions=(5,))),
    ),
    Case(
        "add-partitions/fenced-epoch",
        (topic(), ready(), init_producer("{txn}", compare=False), add_partitions(epoch="init+3")),
    ),
    Case(
        "add-partitions/wrong-producer-id",
        (topic(), ready(), init_producer("{txn}", compare=False), add_partitions(pid=424242)),
    ),
    Case("add-partitions/unknown-transactional-id", (topic(), ready(), add_partitions(pid=1, epoch=0))),
    Case("add-partitions/twice", (*begun(), add_partitions())),
    Case(
        "add-partitions/two-partitions",
        (
            topic(2),
            ready(partitions=2),
            init_producer("{txn}", compare=False),
            add_partitions(partitions=(0, 1)),
        ),
    ),
]

# Transactional produce, EndTxn, read_committed
CASES += [
    Case("txn/produce-in-transaction", (*begun(), tproduce())),
    Case("txn/produce-without-add", (topic(), ready(), init_producer("{txn}", compare=False), tproduce())),
    Case("txn/produce-fenced-epoch", (*begun(), tproduce(epoch="init+1"))),
    Case("txn/commit", (*begun(), tproduce(2), end(True), describe_txn())),
    Case("txn/abort", (*begun(), tproduce(2), end(False), describe_txn())),
    Case(
        "txn/commit-then-read-committed",
        (*begun(), tproduce(2), end(True), settled(3), fetch(isolation=1), list_offsets(-1, isolation=1)),
    ),
    Case(
        "txn/abort-then-read-committed",
        (*begun(), tproduce(2), end(False), settled(3), fetch(isolation=1), list_offsets(-1, isolation=1)),
    ),
    Case(
        "txn/open-read-committed", (*begun(), tproduce(2), fetch(isolation=1), list_offsets(-1, isolation=1))
    ),
    Case(
        "txn/open-read-uncommitted",
        (*begun(), tproduce(2), fetch(isolation=0), list_offsets(-1, isolation=0)),
    ),
    Case("txn/end-without-begin", (init_producer("{txn}", compare=False), end(True))),
    Case("txn/abort-without-begin", (init_producer("{txn}", compare=False), end(False))),
    Case("txn/end-fenced-epoch", (*begun(), end(True, epoch="init+2"))),
    Case("txn/end-wrong-producer-id", (*begun(), end(True, pid=777777))),
    Case("txn/end-unknown-transactional-id", (end(True, pid=1, epoch=0),)),
    Case("txn/commit-twice", (*begun(), tproduce(), end(True), end(True))),
    Case("txn/commit-then-abort", (*begun(), tproduce(), end(True), end(False))),
    Case("txn/end-v0", (*begun(), end(True, version=0))),
    Case("txn/end-v2", (*begun(), end(False, version=2))),
    Case(
        "txn/second-transaction",
        (*begun(), tproduce(), end(True), add_partitions(), tproduce(seq=1), end(True), describe_txn()),
    ),
]

# AddOffsetsToTxn / TxnOffsetCommit
for v in (0, 1, 2, 3):
    CASES.append(Case(f"add-offsets/v{v}/ok", (*begun(), coordinator(compare=False), add_offsets(version=v))))
CASES += [
    Case("add-offsets/fenced-epoch", (*begun(), add_offsets(epoch="init+4"))),
    Case("add-offsets/without-init", (add_offsets(pid=5, epoch=0),)),
    Case("txn-offset-commit/ok", (*begun(), coordinator(compare=False), add_offsets(), txn_commit())),
    Case(
        "txn-offset-commit/v0", (*begun(), coordinator(compare=False), add_offsets(), txn_commit(version=0))
    ),
    Case(
        "txn-offset-commit/v2", (*begun(), coordinator(compare=False), add_offsets(), txn_commit(version=2))
    ),
    Case("txn-offset-commit/without-add-offsets", (*begun(), coordinator(compare=False), txn_commit())),
    Case(
        "txn-offset-commit/fenced-epoch",
        (*begun(), coordinator(compare=False), add_offsets(), txn_commit(epoch="init+1")),
    ),
    Case(
        "txn-offset-commit/unknown-topic",
        (*begun(), coordinator(compare=False), add_offsets(), txn_commit(name="no-{topic}")),
    ),
]

# DescribeTransactions / ListTransactions
CASES += [
    Case("describe-transactions/fresh", (init_producer("{txn}", compare=False), describe_txn())),
    Case("describe-transactions/ongoing", (*begun(), describe_txn())),
    Case("describe-transactions/unknown", (describe_txn(),)),
    Case(
        "describe-transactions/known-and-unknown",
        (init_producer("{txn}", compare=False), describe_txn("{txn}", "no-{txn}")),
    ),
    Case("list-transactions/no-match", (list_txn(),)),
    Case("list-transactions/unknown-state", (list_txn(("NoSuchState",)),)),
    Case("list-transactions/v1-no-match", (list_txn(version=1),)),
]
