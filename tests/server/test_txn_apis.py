"""The transaction coordinator over raw frames: FindCoordinator, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit in every version, Kafka's errors, Produce's check of
transactional batches, and the state reloaded from `__transaction_state` after a restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from odradek.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from odradek.protocol.messages.describe_transactions import DescribeTransactionsRequest
from odradek.protocol.messages.end_txn import EndTxnRequest
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.protocol.messages.list_transactions import ListTransactionsRequest
from odradek.protocol.messages.offset_fetch import OffsetFetchRequest
from odradek.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.testing.broker import BrokerProcess
from tests.conftest import topic_name
from tests.server.raw_client import RawClient
from tests.server.test_produce import create_topic, produce

TRANSACTION = 1
GROUP = 0


def find(client: RawClient, key: str, key_type: int = TRANSACTION, version: int = 3):
    return client.call(ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key=key, key_type=key_type))


def init(client: RawClient, transactional_id: str, version: int = 5, **fields: object):
    fields = {"transaction_timeout_ms": 60_000, **fields}
    request = InitProducerIdRequest(transactional_id=transactional_id, **fields)  # type: ignore[arg-type]
    return client.call(ApiKey.INIT_PRODUCER_ID, version, request)


def init_found(client: RawClient, transactional_id: str, version: int = 5):
    assert find(client, transactional_id).error_code == ErrorCode.NONE
    response = init(client, transactional_id, version)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


def add(
    client: RawClient, tid: str, pid: int, epoch: int, topic: str, partitions=(0,), version: int = 3
) -> list[int]:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(topic, list(partitions))],
    )
    response = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
    return [
        p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition
    ]


def end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 4) -> int:
    request = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return client.call(ApiKey.END_TXN, version, request).error_code


def end_settled(client: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    """EndTxn, then retried until the markers are written (a retry answers NONE once complete)."""
    code = end(client, tid, pid, epoch, commit)
    deadline = time.monotonic() + 10
    while code in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS) and time.monotonic() < deadline:
        code = end(client, tid, pid, epoch, commit)
        if code == ErrorCode.NONE:
            return code
        time.sleep(0.05)
    return code


def txn_batch(pid: int, epoch: int, sequence: int = 0) -> bytes:
    record = SimpleRecord(b"v", timestamp=1_700_000_000_000)
    return build_batch(
        [record], producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
    )


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


@pytest.mark.parametrize("version", range(0, 6))
def test_find_coordinator_creates_the_transaction_log(client: RawClient, version: int) -> None:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=TRANSACTION, coordinator_keys=[f"find-{version}"])
        (found,) = client.call(ApiKey.FIND_COORDINATOR, version, request).coordinators
    else:
        found = client.call(
            ApiKey.FIND_COORDINATOR,
            version,
            FindCoordinatorRequest(key=f"find-{version}", key_type=TRANSACTION),
        )
    assert found.error_code == ErrorCode.NONE and found.port > 0


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_bumps_the_epoch_of_a_transactional_id(client: RawClient, version: int) -> None:
    tid = f"init-{version}"
    pid, epoch = init_found(client, tid, version)
    again = init(client, tid, version)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)


def test_init_with_a_stale_producer_epoch_is_fenced(client: RawClient) -> None:
    pid, epoch = init_found(client, "stale")
    assert init(client, "stale").error_code == ErrorCode.NONE  # epoch + 1
    assert (
        init(client, "stale", producer_id=pid, producer_epoch=epoch).error_code == ErrorCode.PRODUCER_FENCED
    )
    old = init(client, "stale", version=3, producer_id=pid, producer_epoch=epoch)
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("version", [3, 4, 5])
def test_init_producer_id_retried_bump(client: RawClient, version: int) -> None:
    """KIP-360: an InitProducerId naming the epoch of a bump already done (its answer was lost) gets
    the current producer id and epoch, not PRODUCER_FENCED; an older epoch is still fenced."""
    tid = f"retried-bump-{version}"
    pid, epoch = init_found(client, tid)
    first = init(client, tid, version, producer_id=pid, producer_epoch=epoch)
    assert (first.error_code, first.producer_id, first.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    retried = init(client, tid, version, producer_id=pid, producer_epoch=epoch)
    answered = (retried.error_code, retried.producer_id, retried.producer_epoch)
    assert answered == (ErrorCode.NONE, pid, epoch + 1)
    bumped = init(client, tid, version, producer_id=pid, producer_epoch=epoch + 1)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.NONE, epoch + 2)
    fenced = ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert init(client, tid, version, producer_id=pid, producer_epoch=epoch).error_code == fenced
    assert init(client, tid, version, producer_id=pid + 1, producer_epoch=epoch + 2).error_code == fenced
    # A new producer (no id given) forgets the remembered epoch: the old one's retry is fenced.
    assert init(client, tid, version).producer_epoch == epoch + 3
    assert init(client, tid, version, producer_id=pid, producer_epoch=epoch + 1).error_code == fenced


@pytest.mark.parametrize("version", range(0, 4))
def test_add_partitions_errors(client: RawClient, version: int) -> None:
    name, _ = create_topic(client, partitions=2)
    tid = f"add-{version}"
    pid, epoch = init_found(client, tid)
    assert add(client, tid, pid + 1, epoch, name, version=version) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert add(client, tid, pid, epoch - 1, name, version=version) == [fenced]
    assert add(client, "never-initialized", pid, epoch, name, version=version) == [
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    ]
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name, [0]),
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(topic_name("missing"), [0]),
        ],
    )
    response = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
    codes = [
        [p.partition_error_code for p in t.results_by_partition]
        for t in response.results_by_topic_v3_and_below
    ]
    assert codes == [[ErrorCode.OPERATION_NOT_ATTEMPTED], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    assert add(client, tid, pid, epoch, name, (0, 1), version=version) == [ErrorCode.NONE] * 2


def add_batched(client: RawClient, transactions, version: int = 5) -> dict[str, list[int]]:
    """AddPartitionsToTxn v4+: (tid, pid, epoch, verify_only, topic, partitions) per transaction;
    the partition errors by transactional id."""
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(
        transactions=[
            Txn(tid, pid, epoch, verify_only, [Topic(topic, list(partitions))])
            for tid, pid, epoch, verify_only, topic, partitions in transactions
        ]
    )
    response = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
    assert response.error_code == ErrorCode.NONE
    return {
        result.transactional_id: [
            p.partition_error_code for t in result.topic_results for p in t.results_by_partition
        ]
        for result in response.results_by_transaction
    }


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batched_and_verify_only(client: RawClient, version: int) -> None:
    name, _ = create_topic(client, partitions=3)
    one, two = f"batch-a-{version}", f"batch-b-{version}"
    pid1, epoch1 = init_found(client, one)
    pid2, epoch2 = init_found(client, two)
    # Verifying before anything was added: the partitions are not in the (empty) transaction.
    assert add_batched(client, [(one, pid1, epoch1, True, name, (0,))], version) == {
        one: [ErrorCode.TRANSACTION_ABORTABLE]
    }
    # Two transactions in one request, one adding and one failing as a whole.
    answered = add_batched(
        client,
        [(one, pid1, epoch1, False, name, (0, 1)), (two, pid2 + 1, epoch2, False, name, (0,))],
        version,
    )
    assert answered == {one: [ErrorCode.NONE] * 2, two: [ErrorCode.INVALID_PRODUCER_ID_MAPPING]}
    # verify_only adds nothing and answers per partition.
    verified = add_batched(client, [(one, pid1, epoch1, True, name, (0, 1, 2))], version)
    assert verified == {one: [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.TRANSACTION_ABORTABLE]}
    assert add_batched(client, [(one, pid1, epoch1, True, name, (2,))], version) == {
        one: [ErrorCode.TRANSACTION_ABORTABLE]
    }
    # Whole-transaction errors of verify_only.
    checks = [
        (one, pid1 + 1, epoch1, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (one, pid1, epoch1 - 1, ErrorCode.PRODUCER_FENCED),
        (one, pid1, epoch1 + 1, ErrorCode.PRODUCER_FENCED),
        ("never-initialized-batch", pid1, epoch1, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        ("", pid1, epoch1, ErrorCode.INVALID_REQUEST),
    ]
    for tid, pid, epoch, expected in checks:
        assert add_batched(client, [(tid, pid, epoch, True, name, (0, 1))], version) == {tid: [expected] * 2}
    missing = topic_name("missing")
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(
        transactions=[Txn(one, pid1, epoch1, True, [Topic(name, [0]), Topic(missing, [0])])]
    )
    (result,) = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, request).results_by_transaction
    codes = [[p.partition_error_code for p in t.results_by_partition] for t in result.topic_results]
    assert codes == [[ErrorCode.OPERATION_NOT_ATTEMPTED], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    # A transaction being completed answers CONCURRENT_TRANSACTIONS until its markers are written;
    # once complete, its partitions are no longer in a transaction.
    assert end(client, one, pid1, epoch1, True) == ErrorCode.NONE
    assert end_settled(client, one, pid1, epoch1, True) == ErrorCode.NONE
    assert add_batched(client, [(one, pid1, epoch1, True, name, (0,))], version) == {
        one: [ErrorCode.TRANSACTION_ABORTABLE]
    }


@pytest.mark.parametrize("version", range(0, 5))
def test_end_txn_states(client: RawClient, version: int) -> None:
    name, _ = create_topic(client)
    tid = f"end-{version}"
    pid, epoch = init_found(client, tid)
    assert end(client, tid, pid, epoch, True, version) == ErrorCode.INVALID_TXN_STATE  # Empty
    assert add(client, tid, pid, epoch, name) == [ErrorCode.NONE]
    assert produce(client, name, txn_batch(pid, epoch), transactional_id=tid).error_code == ErrorCode.NONE
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert end(client, tid, pid, epoch - 1, True, version) == fenced
    assert end(client, tid, pid, epoch, True, version) == ErrorCode.NONE
    assert end_settled(client, tid, pid, epoch, True) == ErrorCode.NONE  # a retry of a completed commit
    assert end(client, tid, pid, epoch, False, version) == ErrorCode.INVALID_TXN_STATE


@pytest.mark.parametrize("version", [3, 10, 11])
def test_produce_checks_that_the_partition_is_in_the_transaction(client: RawClient, version: int) -> None:
    """KIP-890 part 1: the leader verifies with the coordinator (here the same broker). A partition
    not added answers INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from Produce v11 (Kafka 3.9)."""
    name, _ = create_topic(client, partitions=2)
    tid = f"verify-{version}"
    pid, epoch = init_found(client, tid)
    assert add(client, tid, pid, epoch, name, (0,)) == [ErrorCode.NONE]
    outside = produce(client, name, txn_batch(pid, epoch), transactional_id=tid, partition=1, version=version)
    expected = ErrorCode.TRANSACTION_ABORTABLE if version >= 11 else ErrorCode.INVALID_TXN_STATE
    assert outside.error_code == expected
    if 8 <= version < 11:
        assert outside.error_message == "Partition was not added to the transaction"
    stale = produce(client, name, txn_batch(pid, epoch - 1), transactional_id=tid, version=version)
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    inside = produce(client, name, txn_batch(pid, epoch), transactional_id=tid, version=version)
    assert inside.error_code == ErrorCode.NONE
    # Once the transaction is ongoing in the partition, later batches are not verified again.
    again = produce(client, name, txn_batch(pid, epoch, sequence=1), transactional_id=tid, version=version)
    assert again.error_code == ErrorCode.NONE
    assert end_settled(client, tid, pid, epoch, True) == ErrorCode.NONE
    # After the commit, partition 0 is no longer in a transaction: verification fails again.
    after = produce(client, name, txn_batch(pid, epoch, sequence=2), transactional_id=tid, version=version)
    assert after.error_code == expected


def test_init_aborts_the_ongoing_transaction_of_the_previous_producer(client: RawClient) -> None:
    name, _ = create_topic(client)
    pid, epoch = init_found(client, "zombie")
    assert add(client, "zombie", pid, epoch, name) == [ErrorCode.NONE]
    assert init(client, "zombie").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    deadline = time.monotonic() + 10
    response = init(client, "zombie")
    while response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
        time.sleep(0.05)
        response = init(client, "zombie")
    assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, epoch + 2)
    assert end(client, "zombie", pid, epoch, True) == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("version", range(0, 5))
def test_txn_offsets_are_visible_on_commit_only(client: RawClient, version: int) -> None:
    name, _ = create_topic(client)
    group, tid = f"txn-group-{version}", f"offsets-{version}"
    assert find(client, group, GROUP).error_code == ErrorCode.NONE
    pid, epoch = init_found(client, tid)
    for offset, commit in ((7, False), (9, True)):
        request = AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
        )
        assert client.call(ApiKey.ADD_OFFSETS_TO_TXN, version, request).error_code == ErrorCode.NONE
        partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(0, offset, -1, "meta")
        commit_request = TxnOffsetCommitRequest(
            transactional_id=tid,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name, [partition])],
        )
        response = client.call(ApiKey.TXN_OFFSET_COMMIT, version, commit_request)
        assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
        assert fetched(client, group, name, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetched(client, group, name, require_stable=False) == (ErrorCode.NONE, -1)
        assert end_settled(client, tid, pid, epoch, commit) == ErrorCode.NONE
        assert fetched(client, group, name, require_stable=True) == (ErrorCode.NONE, 9 if commit else -1)


def fetched(client: RawClient, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    request = OffsetFetchRequest(
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(topic, [0])],
        require_stable=require_stable,
    )
    (partition,) = client.call(ApiKey.OFFSET_FETCH, 7, request).topics[0].partitions
    return partition.error_code, partition.committed_offset


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_and_list_transactions(client: RawClient, version: int) -> None:
    name, _ = create_topic(client, partitions=2)
    tid = f"described-{version}"
    pid, epoch = init_found(client, tid)
    assert add(client, tid, pid, epoch, name, (0, 1)) == [ErrorCode.NONE] * 2
    request = DescribeTransactionsRequest(transactional_ids=[tid, "unknown-id"])
    known, unknown = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, request).transaction_states
    assert (known.error_code, known.transaction_state, known.producer_id) == (ErrorCode.NONE, "Ongoing", pid)
    assert [(t.topic, t.partitions) for t in known.topics] == [(name, [0, 1])]
    assert known.transaction_start_time_ms > 0 and known.transaction_timeout_ms == 60_000
    assert unknown.error_code in (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR)
    listing = ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[pid])
    listed = client.call(ApiKey.LIST_TRANSACTIONS, version, listing)
    assert listed.unknown_state_filters == ["Nope"]
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [
        (tid, "Ongoing")
    ]
    assert end(client, tid, pid, epoch, False) == ErrorCode.NONE


def test_list_transactions_by_id_pattern(client: RawClient) -> None:
    """v2: the whole id must match the pattern (as Kafka 4.4 answers: "abc" lists abc, not xabcx);
    null or empty lists every id; a pattern RE2/J refuses is INVALID_REGULAR_EXPRESSION."""
    ids = ["pattern-abc", "pattern-xabcx", "pattern-other"]
    for tid in ids:
        init_found(client, tid)

    def listed(pattern: str | None) -> tuple[int, list[str]]:
        response = client.call(
            ApiKey.LIST_TRANSACTIONS, 2, ListTransactionsRequest(transactional_id_pattern=pattern)
        )
        found = sorted(s.transactional_id for s in response.transaction_states if s.transactional_id in ids)
        return response.error_code, found

    assert listed(None) == listed("") == listed("pattern-.*") == (ErrorCode.NONE, sorted(ids))
    assert listed("pattern-abc") == listed("pattern-a.c") == (ErrorCode.NONE, ["pattern-abc"])
    assert listed("abc") == listed("PATTERN-ABC") == (ErrorCode.NONE, [])
    assert listed("pattern-(xabcx|other)") == (ErrorCode.NONE, ["pattern-other", "pattern-xabcx"])
    assert listed("(") == listed("pattern-a++bc") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])


def test_transactional_state_survives_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out")
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            name, _ = create_topic(client)
            pid, epoch = init_found(client, "durable")
            assert add(client, "durable", pid, epoch, name) == [ErrorCode.NONE]
        broker.restart(hard=True)
        with RawClient(broker.bootstrap) as client:
            deadline = time.monotonic() + 10
            code = end(client, "durable", pid, epoch, True)
            while code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                assert time.monotonic() < deadline
                time.sleep(0.1)
                code = end(client, "durable", pid, epoch, True)
            assert code == ErrorCode.NONE  # the Ongoing transaction was reloaded
    finally:
        broker.stop()


def test_add_offsets_creates_the_offsets_topic(tmp_path: Path) -> None:
    """AddOffsetsToTxn before any FindCoordinator for a group (the Java producer's order)."""
    broker = BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out")
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            pid, epoch = init_found(client, "offsets-first")
            request = AddOffsetsToTxnRequest(
                transactional_id="offsets-first", producer_id=pid, producer_epoch=epoch, group_id="g"
            )
            assert client.call(ApiKey.ADD_OFFSETS_TO_TXN, 4, request).error_code == ErrorCode.NONE
            assert find(client, "g", GROUP).error_code == ErrorCode.NONE
            assert end_settled(client, "offsets-first", pid, epoch, True) == ErrorCode.NONE
    finally:
        broker.stop()


def test_idle_ids_expire_and_timed_out_transactions_are_aborted(tmp_path: Path) -> None:
    overrides = {
        "transactional.id.expiration.ms": 1000,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    }
    broker = BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out", overrides=overrides)
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            name, _ = create_topic(client)
            idle_pid, idle_epoch = init_found(client, "idle")
            assert find(client, "slow").error_code == ErrorCode.NONE
            slow = init(client, "slow", transaction_timeout_ms=300)
            assert add(client, "slow", slow.producer_id, slow.producer_epoch, name) == [ErrorCode.NONE]
            time.sleep(0.8)  # the slow transaction timed out: aborted at a bumped epoch
            assert (
                end(client, "slow", slow.producer_id, slow.producer_epoch, True) == ErrorCode.PRODUCER_FENCED
            )
            time.sleep(1.5)  # both ids idle past the expiration
            assert add(client, "idle", idle_pid, idle_epoch, name) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
            renewed = init(client, "idle")
            assert renewed.error_code == ErrorCode.NONE and renewed.producer_id != idle_pid
    finally:
        broker.stop()


def test_verification_can_be_disabled(tmp_path: Path) -> None:
    """transaction.partition.verification.enable=false: a transactional batch is appended without
    asking the coordinator (Kafka before 3.6)."""
    overrides = {"transaction.partition.verification.enable": "false"}
    broker = BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out", overrides=overrides)
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            name, _ = create_topic(client, partitions=2)
            pid, epoch = init_found(client, "unverified")
            assert add(client, "unverified", pid, epoch, name, (0,)) == [ErrorCode.NONE]
            outside = produce(client, name, txn_batch(pid, epoch), transactional_id="unverified", partition=1)
            assert outside.error_code == ErrorCode.NONE
    finally:
        broker.stop()
