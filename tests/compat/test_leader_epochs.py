"""Leader epochs of a real broker: ListOffsets epochs, OffsetForLeaderEpoch, and the
leader-epoch-checkpoint file across restarts, kill -9 and damage.

A single-node broker bumps every partition's leader epoch at each start (it is elected controller
again), so restarting between produces gives a log written in several epochs. Apache Kafka's
behaviour is the oracle: ListOffsets (v4+) answers the epoch of the batch holding the offset it
returns (the leader's current epoch for LATEST); OffsetForLeaderEpoch answers where an epoch ended
(the log end offset for the current one, the next epoch's start offset for an older one, -1/-1 for
an unknown newer one); `leader-epoch-checkpoint` is "0", a count, then "epoch start_offset" lines.
librdkafka validates an assigned position that carries a leader epoch with OffsetForLeaderEpoch.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers, wire

pytestmark = pytest.mark.slow

API_OFFSET_FOR_LEADER_EPOCH = 23
NONE, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 0, 3, 74, 75
T0 = int(time.time() * 1000) - 3_600_000


def restart(broker: BrokerProcess, topic: str, *, crash: bool = False) -> None:
    if crash:
        broker.kill()
    else:
        assert broker.stop() == 0, broker.output_tail()
    broker.start()
    helpers.wait_for_leaders(broker.bootstrap, topic, 1)


def produce_at(broker: BrokerProcess, topic: str, count: int, timestamp: int) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        batch = wire.record_batch([(b"k", b"v%d" % i) for i in range(count)], timestamp)
        assert conn.produce(topic, 0, batch).error_code == 0


@pytest.fixture
def epochs_topic(make_broker, unique_topic: str) -> tuple[BrokerProcess, str]:
    """Offsets 0-2 written in epoch 0 (at T0), 3-4 in epoch 1 (at T0+1000), 5 in epoch 2 (at
    T0+2000); the broker now leads in epoch 2."""
    broker = make_broker({"log.flush.offset.checkpoint.interval.ms": 100})
    helpers.create_topic(broker.bootstrap, unique_topic)
    produce_at(broker, unique_topic, 3, T0)
    restart(broker, unique_topic)
    produce_at(broker, unique_topic, 2, T0 + 1000)
    restart(broker, unique_topic)
    produce_at(broker, unique_topic, 1, T0 + 2000)
    return broker, unique_topic


def checkpoint(broker: BrokerProcess, topic: str, expected: str) -> str:
    """The checkpoint file once it reads `expected`, or as it is after the timeout: the broker
    writes it with its periodic checkpoint (log.flush.offset.checkpoint.interval.ms), not on change."""
    path = broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint"
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while True:
        text = path.read_text() if path.exists() else ""
        if text == expected or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


# -- OffsetForLeaderEpoch over raw frames ----------------------------------------------------------


def offset_for_leader_epoch(
    broker: BrokerProcess, version: int, topic: str, leader_epoch: int, current: int = -1, partition: int = 0
) -> tuple[int, int, int]:
    """(error_code, leader_epoch, end_offset) for one partition; leader_epoch is -1 in v0."""
    with wire.Connection(broker.bootstrap) as conn:
        if version == 4:
            return _flexible_v4(conn, topic, partition, current, leader_epoch)
        body = struct.pack(">i", -1) if version >= 3 else b""
        fields = (
            struct.pack(">ii", current, leader_epoch) if version >= 2 else struct.pack(">i", leader_epoch)
        )
        body += struct.pack(">i", 1) + wire._string(topic) + struct.pack(">ii", 1, partition) + fields
        r = wire.Reader(conn.call(API_OFFSET_FOR_LEADER_EPOCH, version, body))
        if version >= 2:
            assert r.int32() == 0  # throttle_time_ms
        assert r.array_len() == 1 and r.string() == topic and r.array_len() == 1
        error_code, answered = r.int16(), r.int32()
        epoch = r.int32() if version >= 1 else -1
        end_offset = r.int64()
        assert answered == partition and r.pos == len(r.data)
        return error_code, epoch, end_offset


def _flexible_v4(
    conn: wire.Connection, topic: str, partition: int, current: int, leader_epoch: int
) -> tuple[int, int, int]:
    """Request header v2, compact arrays and strings, empty tagged field sections."""
    name = topic.encode()
    header = struct.pack(">hhi", API_OFFSET_FOR_LEADER_EPOCH, 4, 99) + wire._string(wire.CLIENT_ID) + b"\0"
    body = struct.pack(">i", -1) + bytes([2, len(name) + 1]) + name + bytes([2])
    body += struct.pack(">iii", partition, current, leader_epoch) + b"\0\0\0"
    conn.sock.sendall(struct.pack(">i", len(header + body)) + header + body)
    correlation_id, payload = wire.recv_response(conn.sock)
    assert correlation_id == 99
    r = wire.Reader(payload)
    assert r.int8() == 0 and r.int32() == 0  # response header tags, throttle_time_ms
    assert r.int8() == 2 and r.data[r.pos + 1 : r.pos + 1 + len(name)] == name
    r.pos += 1 + len(name)
    assert r.int8() == 2
    error_code, answered, epoch, end_offset = r.int16(), r.int32(), r.int32(), r.int64()
    assert answered == partition and r.data[r.pos :] == b"\0\0\0"
    return error_code, epoch, end_offset


@pytest.mark.parametrize("version", range(5))
def test_offset_for_leader_epoch_answers_where_each_epoch_ended(epochs_topic, version: int) -> None:
    broker, topic = epochs_topic
    expected = {0: (0, 3), 1: (1, 5), 2: (2, 6), 3: (-1, -1)}
    for epoch, (answered_epoch, end_offset) in expected.items():
        if version == 0:
            answered_epoch = -1
        assert offset_for_leader_epoch(broker, version, topic, epoch) == (NONE, answered_epoch, end_offset)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_fences_current_leader_epoch(epochs_topic, version: int) -> None:
    broker, topic = epochs_topic
    assert offset_for_leader_epoch(broker, version, topic, 1, current=2) == (NONE, 1, 5)
    assert offset_for_leader_epoch(broker, version, topic, 1, current=1)[0] == FENCED_LEADER_EPOCH
    assert offset_for_leader_epoch(broker, version, topic, 1, current=3)[0] == UNKNOWN_LEADER_EPOCH
    unknown = offset_for_leader_epoch(broker, version, topic, 1, partition=7)
    assert unknown == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    assert offset_for_leader_epoch(broker, version, topic + "-nope", 1)[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_api_versions_advertises_offset_for_leader_epoch(fresh_broker: BrokerProcess) -> None:
    with wire.Connection(fresh_broker.bootstrap) as conn:
        assert conn.api_versions().ranges[API_OFFSET_FOR_LEADER_EPOCH] == (0, 4)


# -- ListOffsets epochs through confluent-kafka ------------------------------------------------------


def test_list_offsets_answers_the_epoch_of_the_offset(epochs_topic) -> None:
    broker, topic = epochs_topic
    admin = helpers.admin(broker.bootstrap)
    partition = TopicPartition(topic, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max": OffsetSpec.max_timestamp(),
        "epoch 0": OffsetSpec.for_timestamp(T0),
        "epoch 1": OffsetSpec.for_timestamp(T0 + 1),
        "epoch 2": OffsetSpec.for_timestamp(T0 + 1001),
    }
    answers = {
        name: admin.list_offsets({partition: spec}, request_timeout=helpers.TIMEOUT_S)[partition].result()
        for name, spec in specs.items()
    }
    got = {name: (answer.offset, answer.leader_epoch) for name, answer in answers.items()}
    assert got == {
        "earliest": (0, 0),
        "latest": (6, 2),
        "max": (5, 2),
        "epoch 0": (0, 0),
        "epoch 1": (3, 1),
        "epoch 2": (5, 2),
    }


def test_consumer_offsets_for_times_carry_the_epoch(epochs_topic) -> None:
    broker, topic = epochs_topic
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "odradek-unused", **helpers.QUIET}
    )
    try:
        query = [TopicPartition(topic, 0, ts) for ts in (T0, T0 + 1001)]
        answers = [consumer.offsets_for_times([tp], timeout=helpers.TIMEOUT_S)[0] for tp in query]
    finally:
        consumer.close()
    assert [(a.offset, a.leader_epoch) for a in answers] == [(0, 0), (5, 2)]


# -- librdkafka's position validation (KIP-320) -------------------------------------------------------


def first_event(broker: BrokerProcess, topic: str, offset: int, leader_epoch: int) -> tuple[int, str]:
    """(offset, "") of the first message consumed from an assigned position carrying a leader
    epoch, or (-1, error text) when the consumer reports an error instead."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "odradek-unused",
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
            **helpers.QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset, leader_epoch=leader_epoch)])
        message = consumer.poll(helpers.TIMEOUT_S)
    finally:
        consumer.close()
    assert message is not None, "nothing consumed and no error reported"
    error = message.error()
    return (-1, str(error)) if error is not None else (message.offset(), "")


def test_librdkafka_validates_its_position_with_offset_for_leader_epoch(epochs_topic) -> None:
    broker, topic = epochs_topic
    assert first_event(broker, topic, 3, 0) == (3, "")  # epoch 0 ended at 3: nothing was lost
    assert first_event(broker, topic, 5, 1) == (5, "")
    offset, error = first_event(broker, topic, 4, 0)  # epoch 0 never reached 4: a truncated log
    assert offset == -1
    assert "truncation detected" in error and "broker end offset is 3" in error


# -- the checkpoint file across restarts and damage -------------------------------------------------


def test_checkpoint_survives_restart_and_kill_9(epochs_topic) -> None:
    broker, topic = epochs_topic
    assert checkpoint(broker, topic, "0\n3\n0 0\n1 3\n2 5\n") == "0\n3\n0 0\n1 3\n2 5\n"

    restart(broker, topic)
    assert checkpoint(broker, topic, "0\n4\n0 0\n1 3\n2 5\n3 6\n") == "0\n4\n0 0\n1 3\n2 5\n3 6\n"
    produce_at(broker, topic, 2, T0 + 3000)  # offsets 6-7 in epoch 3
    restart(broker, topic, crash=True)

    assert checkpoint(broker, topic, "0\n5\n0 0\n1 3\n2 5\n3 6\n4 8\n") == "0\n5\n0 0\n1 3\n2 5\n3 6\n4 8\n"
    for epoch, expected in {0: (0, 3), 2: (2, 6), 3: (3, 8), 4: (4, 8)}.items():
        assert offset_for_leader_epoch(broker, 4, topic, epoch) == (NONE, *expected)


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_missing_or_damaged_checkpoint_is_rebuilt_from_the_log(epochs_topic, damage: str) -> None:
    broker, topic = epochs_topic
    broker.kill()
    path: Path = broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint"
    if damage == "delete":
        path.unlink()
    else:
        path.write_text("0\n3\n0 0\n1 three\n")
    broker.start()
    helpers.wait_for_leaders(broker.bootstrap, topic, 1)

    assert checkpoint(broker, topic, "0\n4\n0 0\n1 3\n2 5\n3 6\n") == "0\n4\n0 0\n1 3\n2 5\n3 6\n"
    assert offset_for_leader_epoch(broker, 3, topic, 1) == (NONE, 1, 5)
