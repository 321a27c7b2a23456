"""A full disk, for real: a broker whose log dir sits on a 24 MiB tmpfs the test mounts itself.

Apache Kafka's behaviour is the oracle, with odradek's documented deviation (the log dir stays online;
see the produce handler's header): a produce that cannot be written is answered KAFKA_STORAGE_ERROR
(56), the broker keeps running and keeps serving ApiVersions, Metadata and Fetch, says so in a few
log lines (not one per request), and every record acknowledged before the disk filled reads back at
a dense offset. When space returns (the test deletes a filler file it wrote beside the log dir),
produce works again without a restart. A SIGTERM with the disk full exits 0 with the failed
checkpoint and close writes logged, the previous checkpoints kept and the dir not marked clean; a
start with the disk still full is refused (exit 1, a line naming the metadata file it cannot write:
the controller must persist its new epoch, as a KRaft node stops on a failed metadata dir) and
changes nothing; with space back it starts, recovers, and every acknowledged record reads back.
A group's offset commit on a full disk is answered with an error (Kafka's NOT_COORDINATOR for a
failed __consumer_offsets append) and succeeds once space returns.

Needs root (mount); CI runs as root, so a failed mount fails the test instead of skipping it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.controller.local import METADATA_FILE
from odradek.storage.checkpoint import entry_lines
from odradek.testing.broker import BrokerProcess, BrokerStartError
from tests.compat import helpers, wire

KAFKA_STORAGE_ERROR = 56
COORDINATOR_ERRORS = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}
DISK_SIZE = "24m"
FILLER_BYTES = 4 << 20
VALUE_BYTES = 16 << 10
CHUNK = 32  # records produced between two flushes while filling
FAILED_CHUNKS_AFTER_FULL = 4  # keep producing into the full disk to provoke a log flood
MAX_FILL_BYTES = 64 << 20  # a disk that never fills is a failure, not an endless loop
SPACE_ERROR_PATTERN = "No space left on device"
MAX_SPACE_LINES = 3  # a handful of lines per failing partition, however many requests failed
RAW_PRODUCES = 25  # per acks value, on top of the client's failed deliveries
CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint")  # written at start
HW_CHECKPOINT = "replication-offset-checkpoint"  # written every 5 s: maybe not before the disk filled
BROKER_SETTINGS = {
    "log.segment.bytes": 1 << 20,  # rolls while filling: a new segment on a nearly full disk
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
}


@dataclass
class Disk:
    """The mounted tmpfs: `logs` is the broker's log dir; `filler` and `brim` take space beside it."""

    root: Path

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def filler(self) -> Path:
        return self.root / "filler"

    @property
    def brim(self) -> Path:
        return self.root / "brim"

    def write_filler(self) -> None:
        self.filler.write_bytes(b"\0" * FILLER_BYTES)

    def fill_to_brim(self) -> None:
        """Take every free page left (the broker's failed writes may have left a few)."""
        with open(self.brim, "wb", buffering=0) as out:
            for size in (1 << 16, 1 << 12):
                try:
                    while True:
                        out.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc

    def free_space(self) -> None:
        self.filler.unlink()
        self.brim.unlink(missing_ok=True)


@dataclass
class Filled:
    """What filling a topic produced: acknowledged values by offset and the failed deliveries' codes."""

    topic: str
    acked: dict[int, bytes] = field(default_factory=dict)
    failures: list[int] = field(default_factory=list)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a {DISK_SIZE} tmpfs on {root} (these tests need root): {mounted.stderr}")
    try:
        yield Disk(root)
    finally:
        subprocess.run(["umount", str(root)], check=True)


@pytest.fixture
def broker(disk: Disk, tmp_path: Path) -> Iterator[BrokerProcess]:
    disk.write_filler()
    process = BrokerProcess(disk.logs, overrides=BROKER_SETTINGS, output_path=tmp_path / "broker.out")
    process.start()
    try:
        yield process
    finally:
        process.kill()


def value_of(topic: str, index: int) -> bytes:
    return (b"%s-%08d-" % (topic.encode(), index)).ljust(VALUE_BYTES, b"v")


def fill(bootstrap: str, topic: str, acks: str) -> Filled:
    """Produce (no retries, so every failure is reported) until produces fail, then a few more
    chunks into the full disk."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "retries": 0, "linger.ms": 5, **helpers.QUIET}
    )
    filled = Filled(topic)

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is None:
            filled.acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
        else:
            filled.failures.append(err.code())

    failed_chunks = sent = 0
    while failed_chunks < FAILED_CHUNKS_AFTER_FULL:
        assert sent * VALUE_BYTES < MAX_FILL_BYTES, (
            f"{sent} records of {VALUE_BYTES} bytes never filled the disk"
        )
        failures_before = len(filled.failures)
        for _ in range(CHUNK):
            producer.produce(topic, value=value_of(topic, sent), partition=0, on_delivery=on_delivery)
            sent += 1
        assert producer.flush(helpers.TIMEOUT_S) == 0, "deliveries still pending"
        failed_chunks += len(filled.failures) > failures_before
    return filled


def fill_disk(broker: BrokerProcess, disk: Disk, acks: str = "1") -> Filled:
    topic = f"full-disk-acks{acks}"
    helpers.create_topic(broker.bootstrap, topic)
    filled = fill(broker.bootstrap, topic, acks)
    disk.fill_to_brim()
    return filled


def assert_storage_error_answered(filled: Filled, bootstrap: str) -> None:
    """The client saw KAFKA_STORAGE_ERROR, and so does every one of many raw produces."""
    assert filled.acked, "nothing was acknowledged before the disk filled"
    assert filled.failures and set(filled.failures) == {KafkaError.KAFKA_STORAGE_ERROR}, filled.failures
    batch = wire.record_batch([(b"k", value_of(filled.topic, -1) * 4)])
    with wire.Connection(bootstrap) as conn:
        codes = {
            conn.produce(filled.topic, 0, batch, acks=acks).error_code for acks in (1, -1) * RAW_PRODUCES
        }
    assert codes == {KAFKA_STORAGE_ERROR}


def assert_serving(bootstrap: str, filled: Filled) -> None:
    """ApiVersions, Metadata and Fetch answered on a new connection while the disk is full."""
    with wire.Connection(bootstrap) as conn:
        assert conn.api_versions().error_code == 0
        topic = conn.metadata([filled.topic]).topics[filled.topic]
        assert topic.error_code == 0 and topic.partitions[0] == (0, 0)
        fetched = conn.fetch(filled.topic, 0, 0, max_bytes=1 << 20)
        assert fetched.error_code == 0 and fetched.high_watermark == len(filled.acked)


def assert_all_acked_readable(bootstrap: str, filled: Filled, extra: dict[int, bytes] | None = None) -> None:
    """The log holds exactly the acknowledged records, at dense offsets from 0."""
    expected = {**filled.acked, **(extra or {})}
    assert sorted(expected) == list(range(len(expected))), "acknowledged offsets are not dense"
    messages = helpers.consume(bootstrap, filled.topic, len(expected))
    assert [m.offset() for m in messages] == list(range(len(expected)))
    differing = [m.offset() for m in messages if m.value() != expected[m.offset()]]
    assert not differing, f"records at offsets {differing[:10]} differ from what was acknowledged"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "full-disk-watermarks", **helpers.QUIET})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(filled.topic, 0), helpers.TIMEOUT_S)
    finally:
        consumer.close()
    assert (low, high) == (0, len(expected)), "the log holds records nobody acknowledged"


def produce_more(bootstrap: str, filled: Filled, count: int = 20) -> dict[int, bytes]:
    start = len(filled.acked)
    values = [value_of(filled.topic, start + i) for i in range(count)]
    offsets = helpers.produce(bootstrap, filled.topic, values, acks="all")
    assert offsets == list(range(start, start + count))
    return dict(zip(offsets, values, strict=True))


def space_lines(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.output_path.read_text().splitlines() if SPACE_ERROR_PATTERN in line]


@pytest.mark.parametrize("acks", ["1", "all"])
def test_produce_into_a_full_disk_is_answered_and_space_returning_heals(
    broker: BrokerProcess, disk: Disk, acks: str
) -> None:
    filled = fill_disk(broker, disk, acks)

    assert broker.is_running()
    assert_storage_error_answered(filled, broker.bootstrap)
    assert_serving(broker.bootstrap, filled)
    assert_all_acked_readable(broker.bootstrap, filled)
    lines = space_lines(broker)
    assert 1 <= len(lines) <= MAX_SPACE_LINES, f"{len(filled.failures)} failures logged as:\n" + "\n".join(
        lines
    )

    disk.free_space()
    more = produce_more(broker.bootstrap, filled)
    assert_all_acked_readable(broker.bootstrap, filled, more)


def test_restart_on_a_full_disk_recovers_every_acknowledged_record(broker: BrokerProcess, disk: Disk) -> None:
    filled = fill_disk(broker, disk)

    assert broker.stop() == 0, broker.output_tail()
    assert "not marked clean, a write failed while closing" in broker.output_tail()
    assert_checkpoints_parse(disk)
    with pytest.raises(BrokerStartError) as refused:  # the controller cannot persist its new epoch
        broker.start()
    refusal = str(refused.value).splitlines()[-1]
    assert "failed to start" in refusal and f"cannot write {disk.logs / METADATA_FILE}" in refusal, refusal
    assert SPACE_ERROR_PATTERN in refusal, refusal
    assert_checkpoints_parse(disk)

    disk.free_space()
    broker.start()
    assert_all_acked_readable(broker.bootstrap, filled)
    more = produce_more(broker.bootstrap, filled)
    assert_all_acked_readable(broker.bootstrap, filled, more)
    assert_checkpoints_parse(disk)
    assert "malformed checkpoint" not in broker.output_path.read_text()


def assert_checkpoints_parse(disk: Disk) -> None:
    for name in CHECKPOINTS:
        assert (disk.logs / name).exists(), f"{name} is gone"
    for name in (*CHECKPOINTS, HW_CHECKPOINT):
        if (disk.logs / name).exists():
            entry_lines((disk.logs / name).read_text())
    leftovers = sorted(str(p.relative_to(disk.logs)) for p in disk.logs.rglob("*.tmp"))
    assert not leftovers, f"temporary files left behind: {leftovers}"


def commit_with_retries(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit as an application does: retry the coordinator errors (retriable in Kafka's clients)
    while the client finds the coordinator again."""
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_ERRORS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_group_commit_on_a_full_disk_fails_then_works_once_space_returns(
    broker: BrokerProcess, disk: Disk
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "full-disk-group",
            "enable.auto.commit": False,
            **helpers.QUIET,
        }
    )
    try:
        filled_topic = "full-disk-commits"
        helpers.create_topic(broker.bootstrap, filled_topic)
        position = [TopicPartition(filled_topic, 0, 7)]
        assert (
            consumer.committed(position, timeout=helpers.TIMEOUT_S)[0].offset < 0
        )  # the coordinator is loaded
        fill_disk(broker, disk)

        with pytest.raises(KafkaException) as failed:
            consumer.commit(offsets=position, asynchronous=False)
        assert failed.value.args[0].code() == KafkaError.NOT_COORDINATOR  # Kafka's mapping of error 56

        disk.free_space()
        commit_with_retries(consumer, position)
        assert consumer.committed(position, timeout=helpers.TIMEOUT_S)[0].offset == 7
    finally:
        consumer.close()
    assert broker.is_running()
    assert os.path.isdir(disk.logs / "__consumer_offsets-0")
